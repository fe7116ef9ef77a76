import { sandboxKeyPrefix } from '@sandstream/wire';
import { jobIdFromKey } from './key-space.js';
import type { RedisClient } from './redis-connection.js';
import { redisMasters, scanEveryDatabase } from './scan-keys.js';

/** What one sandbox holds in Redis: its keys and their sizes, largest first. */
export interface SandboxRedisUsage {
  jobId: string;
  bytes: number;
  /** `db`: the database the key is in (a sandbox that could SELECT may have written to any). */
  keys: { key: string; db: number; bytes: number }[];
}

/** Every sandbox's keys, whatever the namespace (job ids are unique across them). */
const SANDBOX_KEY_PATTERN = `${sandboxKeyPrefix('*', 'tagged')}*`;

/**
 * `used_memory` summed over the masters: one INFO per node, O(1) on the server, cheap enough to
 * read every few hundred milliseconds.
 */
export async function redisUsedMemory(redis: RedisClient): Promise<number> {
  const infos = await Promise.all(redisMasters(redis).map((node) => node.info('memory')));
  return infos.reduce((sum, info) => sum + Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0), 0);
}

/**
 * What each of `jobIds`'s sandboxes stores, by SCAN over `sandbox:{…}:*` (never KEYS) in every
 * database that holds keys (scanEveryDatabase) and MEMORY USAGE of the keys found. A sandbox may create any key under its own prefix, so its keys cannot
 * be listed from names the services know. MEMORY USAGE samples five elements of a list or stream
 * and scales, so a key of a million entries costs the same as one of ten.
 */
export async function sandboxRedisUsage(
  redis: RedisClient,
  jobIds: ReadonlySet<string>,
  options: { count?: number; signal?: AbortSignal } = {},
): Promise<Map<string, SandboxRedisUsage>> {
  const usage = new Map<string, SandboxRedisUsage>();
  const seen = new Set<string>();
  for await (const { db, client, keys } of scanEveryDatabase(redis, {
    match: SANDBOX_KEY_PATTERN,
    count: options.count ?? 1000,
    ...(options.signal ? { signal: options.signal } : {}),
  })) {
    const ours = keys.filter((key) => {
      const jobId = jobIdFromKey(key);
      // SCAN may return a key twice; counting it twice would stop a sandbox for nothing.
      if (jobId === null || !jobIds.has(jobId) || seen.has(`${db} ${key}`)) return false;
      seen.add(`${db} ${key}`);
      return true;
    });
    // Sent together: ioredis pipelines them (and routes each to its node on a Cluster).
    const sizes = await Promise.all(ours.map((key) => client.memory('USAGE', key, 'SAMPLES', 5)));
    ours.forEach((key, i) => {
      const bytes = Number(sizes[i] ?? 0); // null: the key went away between SCAN and now
      const jobId = jobIdFromKey(key) as string;
      const entry = usage.get(jobId) ?? { jobId, bytes: 0, keys: [] };
      entry.bytes += bytes;
      entry.keys.push({ key, db, bytes });
      usage.set(jobId, entry);
    });
  }
  for (const entry of usage.values()) entry.keys.sort((a, b) => b.bytes - a.bytes);
  return usage;
}

const OVER_BUDGET = 'over its Redis budget: ';

/** The failure reason of a sandbox stopped for what it stored; sandbox records read it back as `redis-budget`. */
export function redisBudgetReason(storedBytes: number, budgetBytes: number): string {
  const mb = (n: number) => `${(n / (1024 * 1024)).toLocaleString('en-US', { maximumFractionDigits: 1 })} MB`;
  return `${OVER_BUDGET}the sandbox stored ${mb(storedBytes)} in Redis, over its budget of ${mb(budgetBytes)} (SANDBOX_REDIS_BUDGET_MB); it was cut off and what it stored was freed`;
}

export function isRedisBudgetReason(reason: string | undefined): boolean {
  return reason?.startsWith(OVER_BUDGET) ?? false;
}
