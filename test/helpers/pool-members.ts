import { createBackend } from '@sandstream/sandbox';
import type { Cluster, Redis } from 'ioredis';

/**
 * Destroys the warm pool members a run left (`<namespace>-pool-…`): they outlive pod-lifecycle
 * on purpose (the next replica claims them), so a suite or a bench removes its own at the end.
 * `env` picks the backend as the services' environment did.
 */
export async function destroyPoolMembers(
  redis: Redis | Cluster,
  namespace: string,
  env: Record<string, string>,
): Promise<void> {
  const { backend } = await createBackend({
    redis: redis as Redis,
    env: { ...process.env, SANDBOX_TYPE: 'inprocess', ...env },
  });
  try {
    for (const sandbox of await backend.list()) {
      if (sandbox.jobId.startsWith(`${namespace}-pool-`)) {
        await backend.destroy(sandbox, { graceMs: 0 }).catch(() => undefined);
      }
    }
  } finally {
    await backend.close();
  }
}
