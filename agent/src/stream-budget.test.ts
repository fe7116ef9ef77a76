import { randomBytes } from 'node:crypto';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';
import { StreamBudget } from './stream-budget.js';

const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
const key = `t-budget-${randomBytes(4).toString('hex')}`;
afterAll(async () => {
  await redis.unlink(key);
  redis.disconnect();
});
const budget = (highWater: number) =>
  new StreamBudget({
    redis,
    key,
    highWater,
    log: createLogger({ verbose: false, write: () => {} }),
    pollMs: 5,
  });

describe('StreamBudget', () => {
  it('wakes a waiter once something trims the stream below the high water mark', async () => {
    for (let i = 0; i < 10; i++) await redis.xadd(key, '*', 'n', String(i));
    const b = budget(5);
    b.settled(0, await redis.xlen(key));
    expect(b.hasRoom()).toBe(false);
    const woken = new Promise<void>((resolve) => b.onRoom(resolve));
    await redis.xtrim(key, 'MAXLEN', 2);
    await woken;
    expect(b.hasRoom()).toBe(true);
    b.close();
  });

  it('once closed, says it cannot write, so a step woken by the close drops instead of waiting again', async () => {
    await redis.xadd(key, '*', 'n', 'x');
    const b = budget(1);
    b.settled(0, 100);
    const woken = new Promise<void>((resolve) => b.onRoom(resolve));
    b.close();
    await woken;
    // Still no room; but not "connected" either: the caller's fallback is to drop and count.
    expect(b.hasRoom()).toBe(false);
    expect(b.connected).toBe(false);
  });
});
