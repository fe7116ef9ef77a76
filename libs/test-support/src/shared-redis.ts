import { randomBytes } from 'node:crypto';
import { type Cluster, Redis } from 'ioredis';

/**
 * The Redis the whole machine shares (REDIS_URL, default 127.0.0.1:6379). Several developers' and
 * CI's suites use it at once: every test works under its own random namespace or id suffix and
 * removes its own keys; nothing here ever runs FLUSHALL / FLUSHDB.
 */
export function testRedisUrl(): string {
  return process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
}

export function connectTestRedis(url = testRedisUrl()): Redis {
  return new Redis(url, { maxRetriesPerRequest: null });
}

export function uniqueSuffix(): string {
  return randomBytes(5).toString('hex');
}

/** A random namespace for one test run: every shared key and queue of the run lives under it. */
export function uniqueNamespace(label = 't'): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

/**
 * Deletes every key a test run left under its namespace on the shared Redis (BullMQ queues and
 * their finished jobs, indexes, leases, job records and sandbox keys all carry the namespace,
 * since job ids start with it). SCAN + UNLINK in batches, never FLUSHDB: other runs share the
 * server. A Cluster is skipped: cluster tests start their own servers and throw them away.
 */
export async function deleteNamespaceKeys(redis: Redis | Cluster, namespace: string): Promise<number> {
  if (!('scanStream' in redis) || 'nodes' in redis) return 0;
  let deleted = 0;
  const stream = redis.scanStream({ match: `*${namespace}*`, count: 1000 });
  for await (const batch of stream as AsyncIterable<string[]>) {
    if (batch.length > 0) deleted += await redis.unlink(...batch);
  }
  return deleted;
}
