import { randomUUID } from 'node:crypto';
import { createKeySpace } from '@sandstream/bus';
import { connectTestRedis } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { RateLimiter } from './rate-limiter.js';

const redis = connectTestRedis();
afterAll(() => redis.disconnect());

describe('RateLimiter', () => {
  it('counts a burst of one turn in one call and still lets exactly the limit through', async () => {
    const keys = createKeySpace(`rate-${randomUUID()}`);
    const limiter = new RateLimiter({ redis, keys }, 20);
    // 30 requests in the same turn of the event loop: one batch. Past 80 % of the limit each
    // waits for its own place in Redis' count; a wrong place lets too many or too few through.
    const outcomes = await Promise.allSettled(Array.from({ length: 30 }, () => limiter.take('key:k')));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(20);
    const refused = outcomes.filter((o) => o.status === 'rejected');
    expect(refused).toHaveLength(10);
    expect(String((refused[0] as PromiseRejectedResult).reason)).toMatch(/at most 20 requests per minute/);
    // Every request of the burst is in the window's count.
    expect(Number(await redis.get(keys.api('rate:{key:k}')))).toBe(30);
    await redis.del(keys.api('rate:{key:k}'));
  });
});
