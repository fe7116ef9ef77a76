import { connectTestRedis } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { blockingReader, ReaderPool } from './reader-pool.js';

const redis = connectTestRedis();
afterAll(() => redis.disconnect());

describe('ReaderPool', () => {
  it('holds at most its limit: a further follower waits for a released reader and gets it', async () => {
    const pool = new ReaderPool(redis, 2);
    const a = await pool.acquire();
    const b = await pool.acquire();
    let third: unknown;
    const waiting = pool.acquire().then((reader) => {
      third = reader;
      return reader;
    });
    // Let every pending callback run: the third is still waiting, no third connection exists.
    await new Promise((resolve) => setImmediate(resolve));
    expect(third).toBeUndefined();
    await a.ping();
    pool.release(a);
    expect(await waiting).toBe(a);
    // A broken reader is closed, and the next one is fresh.
    pool.release(b, true);
    const c = await pool.acquire();
    expect(c).not.toBe(b);
    pool.release(c);
    pool.release(a);
    pool.close();
  });

  it('tryAcquire never waits: undefined at the limit (a push goes ahead without a reader), a reader once one is released', async () => {
    const pool = new ReaderPool(redis, 1);
    const a = pool.tryAcquire();
    expect(a).toBeDefined();
    if (!a) return;
    expect(pool.tryAcquire()).toBeUndefined();
    // The refusal took nothing: the one reader, released, is handed out again.
    await a.ping();
    pool.release(a);
    expect(pool.tryAcquire()).toBe(a);
    pool.release(a);
    pool.close();
  });
});

describe('blockingReader', () => {
  it('listens for its connection errors (Redis restarting must not print ioredis "Unhandled error event")', () => {
    const base = connectTestRedis();
    const reader = blockingReader(base);
    try {
      expect(reader.listenerCount('error')).toBeGreaterThan(0);
    } finally {
      reader.disconnect();
      base.disconnect();
    }
  });
});
