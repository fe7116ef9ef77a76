import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';
import { escapeGlob, scanEveryDatabase } from './scan-keys.js';

export interface FreeSandboxKeysOptions {
  /** Keys of the home database that stay (its output, kept for retention); none elsewhere. */
  keep?: readonly string[];
  /** SCAN COUNT: bounds the work of one call on the server. */
  count?: number;
  /** Pause between SCAN batches, for a walk that must not hog Redis. */
  pauseMs?: number;
}

/**
 * Frees what one sandbox stored in Redis: every key of its own pattern, `sandbox:{jobId}:*` (it
 * may name any key under its prefix), in every database that holds keys, since an ACL from an
 * older deployment let a sandbox SELECT another one, where its pattern applied just the same.
 * SCAN (COUNT-bounded, never KEYS) and UNLINK (freed off the main thread); never a key outside
 * that pattern. Idempotent. The footprint owner's walk (freeSandboxFootprint, which every path
 * that frees a sandbox calls: destroy, budget stop, reaper), not exported from the package.
 * Returns how many keys went.
 */
export async function freeSandboxKeys(
  redis: RedisClient,
  keySpace: KeySpace,
  jobId: string,
  options: FreeSandboxKeysOptions = {},
): Promise<number> {
  const keep = new Set(options.keep ?? []);
  let freed = 0;
  for await (const batch of scanEveryDatabase(redis, {
    match: `${escapeGlob(keySpace.sandboxPrefix(jobId))}*`,
    count: options.count ?? 1000,
    ...(options.pauseMs ? { pauseMs: options.pauseMs } : {}),
  })) {
    const doomed = batch.home ? batch.keys.filter((key) => !keep.has(key)) : batch.keys;
    // One UNLINK per key, pipelined by ioredis (and routed per key on a Cluster).
    const counts = await Promise.all(doomed.map((key) => batch.client.unlink(key)));
    freed += counts.reduce((sum, n) => sum + n, 0);
  }
  return freed;
}
