import type { Cluster, Redis } from 'ioredis';
import { deleteNamespaceKeys } from './shared-redis.js';

/** A backend as far as a test destroys with it (structural: this package imports no workspace lib). */
export interface DestroyingBackend<Ref extends { jobId: string }> {
  destroy(ref: Ref, options?: { graceMs?: number }): Promise<void>;
}

/**
 * Destroys a sandbox a test made and deletes every key naming its job id. In production the two
 * halves are the backend's destroy and the footprint owner's free, joined by tearDownSandbox
 * (libs/bus), which a backend's own tests cannot import; a test's job id is unique, so every key
 * naming it is the test's own.
 */
export async function destroyTestSandbox<Ref extends { jobId: string }>(
  redis: Redis | Cluster,
  backend: DestroyingBackend<Ref>,
  ref: Ref,
  graceMs: number,
): Promise<void> {
  await backend.destroy(ref, { graceMs });
  await deleteNamespaceKeys(redis, ref.jobId);
}
