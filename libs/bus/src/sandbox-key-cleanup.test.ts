import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeySpace } from './key-space.js';
import { freeSandboxKeys } from './sandbox-key-cleanup.js';

// A private redis-server: keys go into databases 1 and 3, which the shared one must not see.
describe('freeSandboxKeys', () => {
  const own = usePrivateRedis();
  const keySpace = createKeySpace('cleanup');
  const dbs = new Map<number, Redis>();
  const db = (n: number) => dbs.get(n) as Redis;

  beforeAll(() => {
    for (const n of [1, 3]) dbs.set(n, new Redis(`${own.server.url}/${n}`));
  });
  afterAll(() => {
    for (const client of dbs.values()) client.disconnect();
  });

  it("deletes the sandbox's own pattern in every database, keeps what it is told to in the home one, and nothing else", async () => {
    const keys = keySpace.sandbox('job');
    const other = keySpace.sandboxPrefix('job-other');
    await own.redis.set(keys.heartbeat, 'x');
    await own.redis.xadd(keys.events, '*', 'line', 'kept');
    for (let i = 0; i < 2500; i++) await own.redis.set(`${keys.prefix}many:${i}`, 'x'); // several SCAN batches
    await db(1).xadd(keys.events, '*', 'line', 'not its output: another database');
    await db(1).lpush(`${keys.prefix}flood`, 'x');
    await db(3).set(`${keys.prefix}deep`, 'x');
    // Beside them: another sandbox whose id starts the same, a glob look-alike, other keys.
    for (const client of [own.redis, db(1), db(3)]) {
      await client.set(`${other}kept`, 'x');
      await client.set('job:{job}', 'x');
    }
    await own.redis.set(keySpace.sandboxPrefix('jo*'), 'x');

    const freed = await freeSandboxKeys(own.redis, keySpace, 'job', { keep: [keys.events], count: 100 });

    expect(freed).toBe(2500 + 1 + 2 + 1);
    expect(await own.redis.keys(`${keys.prefix}*`)).toEqual([keys.events]);
    expect(await db(1).keys(`${keys.prefix}*`)).toEqual([]);
    expect(await db(3).keys(`${keys.prefix}*`)).toEqual([]);
    for (const client of [own.redis, db(1), db(3)]) {
      expect(await client.exists(`${other}kept`, 'job:{job}')).toBe(2);
    }
    expect(await own.redis.exists(keySpace.sandboxPrefix('jo*'))).toBe(1);
    // Idempotent.
    expect(await freeSandboxKeys(own.redis, keySpace, 'job', { keep: [keys.events] })).toBe(0);
  });

  it('works from a client whose own database is not 0: that one is home, database 0 is another', async () => {
    const keys = keySpace.sandbox('job-3');
    await db(3).xadd(keys.events, '*', 'line', 'kept');
    await own.redis.xadd(keys.events, '*', 'line', 'not its output');
    await own.redis.set(`${keys.prefix}x`, 'x');

    await freeSandboxKeys(db(3), keySpace, 'job-3', { keep: [keys.events] });

    expect(await db(3).keys(`${keys.prefix}*`)).toEqual([keys.events]);
    expect(await own.redis.keys(`${keys.prefix}*`)).toEqual([]);
  });
});
