import { createHash } from 'node:crypto';
import { z } from 'zod';

/**
 * Which installation a sandbox belongs to. Several installations may share one Docker engine or
 * Kubernetes namespace; a reaper must only ever destroy its own installation's orphans. The id is
 * a label on the container or pod and a marker beside an in-process sandbox — never only in
 * Redis, because the case that matters most (Redis restarted empty) is the one where Redis no
 * longer knows anything. It fits a Kubernetes label value.
 */
export const InstallationSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$/,
    'SANDSTREAM_INSTALLATION is 1-63 letters, digits, ".", "_" or "-", starting and ending with a letter or digit',
  );

// The variable itself is declared once for the services, in service-kit's SharedEnv.

export interface InstallationSource {
  SANDSTREAM_INSTALLATION?: string | undefined;
  REDIS_URL: string;
  REDIS_CLUSTER_NODES?: readonly { host: string; port: number }[];
  SANDSTREAM_NAMESPACE: string;
}

/**
 * The default id: a short hash of the Redis address (without credentials, which rotate) and the
 * namespace, so two installations on different Redis servers or namespaces never share one, and
 * every service of one installation computes the same id without coordination. Services that
 * reach the same Redis under different addresses must set SANDSTREAM_INSTALLATION explicitly.
 */
export function deriveInstallation(source: Omit<InstallationSource, 'SANDSTREAM_INSTALLATION'>): string {
  const nodes = source.REDIS_CLUSTER_NODES ?? [];
  let address: string;
  if (nodes.length > 0) {
    address = nodes
      .map((n) => `${n.host}:${n.port}`)
      .sort()
      .join(',');
  } else {
    const url = new URL(source.REDIS_URL);
    address = `${url.hostname}:${url.port || '6379'}${url.pathname === '/' ? '' : url.pathname}`;
  }
  const digest = createHash('sha256').update(`${address}|${source.SANDSTREAM_NAMESPACE}`).digest('hex');
  return `i-${digest.slice(0, 12)}`;
}

export function installationOf(source: InstallationSource): string {
  return source.SANDSTREAM_INSTALLATION ?? deriveInstallation(source);
}
