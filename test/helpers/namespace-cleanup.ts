import type { Cluster, Redis } from 'ioredis';

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
