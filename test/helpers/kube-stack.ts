import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SandstreamClient } from '@sandstream/client';
import {
  type RunningService,
  SERVICE_NAMES,
  startService,
  testRedisUrl,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { stringify } from 'yaml';
import type { KubeApiStandin } from '../kube-api-standin/index.js';

/** A kubeconfig file in `dir` pointing at the API stand-in, as the services load one outside a cluster. */
export function writeStandinKubeconfig(standin: KubeApiStandin, dir: string, namespace: string): string {
  const kubeconfig = join(dir, 'kubeconfig.yaml');
  writeFileSync(
    kubeconfig,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      // client-node refuses plain HTTP unless TLS verification is explicitly off.
      clusters: [{ name: 'standin', cluster: { server: standin.url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'standin', user: {} }],
      contexts: [{ name: 'standin', context: { cluster: 'standin', user: 'standin', namespace } }],
      'current-context': 'standin',
    }),
  );
  return kubeconfig;
}

export interface KubeStack {
  namespace: string;
  client: SandstreamClient;
  logs: () => string;
  stop: () => Promise<void>;
}

/**
 * The four services, started one after another with a generous health timeout: on the shared
 * two-core machine a parallel start under load can take longer than the stack helper allows.
 */
export async function startKubeStack(env: Record<string, string>): Promise<KubeStack> {
  const namespace = uniqueNamespace('k8s');
  const fullEnv = { SANDSTREAM_NAMESPACE: namespace, COMPLETION_SHARDS: '4', LOG_LEVEL: 'info', ...env };
  const services: RunningService[] = [];
  try {
    for (const name of SERVICE_NAMES)
      services.push(await startService(name, fullEnv, { healthTimeoutMs: 90_000 }));
  } catch (err) {
    await Promise.all(services.map((s) => s.stop(2000)));
    throw err;
  }
  const redis = new Redis(testRedisUrl());
  const client = new SandstreamClient({ redis, namespace });
  return {
    namespace,
    client,
    logs: () => services.map((s) => `--- ${s.name}\n${s.output()}`).join('\n'),
    stop: async () => {
      await Promise.all(services.map((s) => s.stop(15_000)));
      await client.close();
      redis.disconnect();
    },
  };
}
