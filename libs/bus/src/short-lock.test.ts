import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeySpace } from './key-space.js';
import { releaseLock, renewLock, tryLock } from './short-lock.js';

const redis = connectTestRedis();
const keys = createKeySpace(`t-${uniqueSuffix()}`);
const used: string[] = [];
const lockKey = (name: string) => {
  const key = keys.lock(`${name}:${uniqueSuffix()}`);
  used.push(key);
  return key;
};

afterAll(async () => {
  if (used.length) await redis.unlink(...used);
  redis.disconnect();
});

describe('short lock', () => {
  it('one of many racing takers gets it, and it lapses by itself', async () => {
    const key = lockKey('race');
    const clients = Array.from({ length: 4 }, () => connectTestRedis());
    try {
      const taken = await Promise.all(
        clients.flatMap((client, c) =>
          Array.from({ length: 5 }, (_, i) => tryLock(client, key, 60_000, `owner-${c}-${i}`)),
        ),
      );
      expect(taken.filter(Boolean)).toHaveLength(1);
    } finally {
      for (const client of clients) client.disconnect();
    }
    const pttl = await redis.pttl(key);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(60_000);
    // The default owner: a lock only meant to lapse, still exclusive.
    const plain = lockKey('plain');
    expect(await tryLock(redis, plain, 60_000)).toBe(true);
    expect(await tryLock(redis, plain, 60_000)).toBe(false);
  });

  it('renews only for its owner', async () => {
    const key = lockKey('renew');
    expect(await tryLock(redis, key, 10_000, 'a')).toBe(true);
    expect(await renewLock(redis, key, 600_000, 'b')).toBe(false);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(10_000);
    expect(await renewLock(redis, key, 600_000, 'a')).toBe(true);
    expect(await redis.pttl(key)).toBeGreaterThan(10_000);
    // Lapsed (here: gone) locks are not brought back by a renewal.
    await redis.del(key);
    expect(await renewLock(redis, key, 600_000, 'a')).toBe(false);
    expect(await redis.exists(key)).toBe(0);
  });

  it('releases only for its owner: a lapsed lock taken by another stays theirs', async () => {
    const key = lockKey('release');
    expect(await tryLock(redis, key, 60_000, 'a')).toBe(true);
    // a's lock lapsed and b took it.
    await redis.del(key);
    expect(await tryLock(redis, key, 60_000, 'b')).toBe(true);
    expect(await releaseLock(redis, key, 'a')).toBe(false);
    expect(await redis.get(key)).toBe('b');
    expect(await releaseLock(redis, key, 'b')).toBe(true);
    expect(await redis.exists(key)).toBe(0);
    expect(await tryLock(redis, key, 60_000, 'c')).toBe(true);
  });
});
