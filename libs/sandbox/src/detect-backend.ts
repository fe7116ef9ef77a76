import { existsSync } from 'node:fs';
import { z } from 'zod';
import type { BackendKind } from './backend.js';

export const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock';

/** The part of the environment that decides the backend; validated so a typo fails loudly. */
export const BackendEnvSchema = z.object({
  SANDBOX_TYPE: z
    .enum(['kubernetes', 'docker', 'inprocess'], {
      error: (issue) =>
        `SANDBOX_TYPE must be one of kubernetes, docker, inprocess (got ${JSON.stringify(issue.input)})`,
    })
    .optional(),
  KUBERNETES_SERVICE_HOST: z.string().optional(),
  DOCKER_HOST: z.string().optional(),
});
export type BackendEnv = z.infer<typeof BackendEnvSchema>;

export interface BackendDetection {
  kind: BackendKind;
  /** One sentence for the operator's log: which signal decided it. */
  reason: string;
}

export interface DetectBackendOptions {
  env?: Record<string, string | undefined>;
  dockerSocketPath?: string;
  /** Injectable for tests; defaults to fs.existsSync. */
  fileExists?: (path: string) => boolean;
}

/**
 * SANDBOX_TYPE wins; then a Kubernetes pod environment; then a reachable-looking Docker engine;
 * else the in-process backend. Empty strings count as unset, because a blank variable in a
 * compose file or Helm value should not silently switch backends.
 */
export function detectBackend(options: DetectBackendOptions = {}): BackendDetection {
  const raw = options.env ?? process.env;
  const blankToUndefined = (v: string | undefined) => (v === undefined || v.trim() === '' ? undefined : v);
  const parsed = BackendEnvSchema.safeParse({
    SANDBOX_TYPE: blankToUndefined(raw.SANDBOX_TYPE),
    KUBERNETES_SERVICE_HOST: blankToUndefined(raw.KUBERNETES_SERVICE_HOST),
    DOCKER_HOST: blankToUndefined(raw.DOCKER_HOST),
  });
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((i) => i.message).join('; '));
  }
  const env = parsed.data;
  if (env.SANDBOX_TYPE) {
    return { kind: env.SANDBOX_TYPE, reason: `SANDBOX_TYPE=${env.SANDBOX_TYPE} is set` };
  }
  if (env.KUBERNETES_SERVICE_HOST) {
    return {
      kind: 'kubernetes',
      reason:
        'KUBERNETES_SERVICE_HOST is set (running inside a pod; set SANDBOX_TYPE to override, e.g. in a dev pod)',
    };
  }
  if (env.DOCKER_HOST) {
    return { kind: 'docker', reason: `DOCKER_HOST=${env.DOCKER_HOST} is set` };
  }
  const socket = options.dockerSocketPath ?? DEFAULT_DOCKER_SOCKET;
  if ((options.fileExists ?? existsSync)(socket)) {
    return { kind: 'docker', reason: `Docker socket ${socket} exists` };
  }
  return {
    kind: 'inprocess',
    reason: `no SANDBOX_TYPE, no KUBERNETES_SERVICE_HOST, no DOCKER_HOST and no ${socket}: sandboxes run as local child processes without isolation`,
  };
}
