import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeySpace } from './key-space.js';
import { PoolClaimCounts } from './pool-claim-counts.js';

const redis = connectTestRedis();
const keys = createKeySpace(`t-${uniqueSuffix()}`);

afterAll(async () => {
  await redis.unlink(keys.pools.claimCounts);
  redis.disconnect();
});

describe('pool claim counts', () => {
  it('counts hits and misses per pool, from many writers, and reads zeros for an unclaimed pool', async () => {
    const clients = Array.from({ length: 3 }, () => connectTestRedis());
    const writers = clients.map((c) => new PoolClaimCounts(c, keys));
    await Promise.all(
      writers.flatMap((w) => [w.record('node', 'hit'), w.record('node', 'hit'), w.record('node', 'miss')]),
    );
    await writers[0]?.record('python', 'miss');
    for (const c of clients) c.disconnect();
    const counts = await new PoolClaimCounts(redis, keys).of(['node', 'python', 'never']);
    expect(counts.get('node')).toEqual({ hits: 6, misses: 3 });
    expect(counts.get('python')).toEqual({ hits: 0, misses: 1 });
    expect(counts.get('never')).toEqual({ hits: 0, misses: 0 });
    expect((await new PoolClaimCounts(redis, keys).of([])).size).toBe(0);
  });
});
