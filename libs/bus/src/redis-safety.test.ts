import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from './redis-connection.js';
import { inspectRedisSafety, redisSafetyWarnings } from './redis-safety.js';

describe('inspectRedisSafety', () => {
  let open: RedisServer;
  let guarded: RedisServer;
  const clients: RedisClient[] = [];
  beforeAll(async () => {
    // What the machine's Redis looks like: default user open, nothing on disk.
    open = await startRedisServer();
    // What npm start's embedded Redis looks like: default off, an admin user, AOF.
    guarded = await startRedisServer({ appendOnly: true });
    const admin = createRedis({ url: guarded.url, role: 'producer' });
    await admin.call('ACL', 'SETUSER', 'admin', 'on', '>s3cret', '~*', '&*', '+@all');
    await admin.call('ACL', 'SETUSER', 'default', 'off');
    admin.disconnect();
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all([open?.stop(), guarded?.stop()]);
  });
  const connect = (url: string) => {
    const client = createRedis({ url, role: 'producer' });
    clients.push(client);
    return client;
  };

  it('warns about an open default user and about a Redis that keeps nothing', async () => {
    const safety = await inspectRedisSafety(connect(open.url));
    expect(safety).toEqual({ openDefaultUser: true, persistence: 'none' });
    const warnings = redisSafetyWarnings(safety);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(
      /`default` user with no password: anything that can reach it has full rights/,
    );
    expect(warnings[1]).toMatch(/a Redis restart loses every job/);
  });

  it('says nothing about a Redis with AOF whose default user is off', async () => {
    const safety = await inspectRedisSafety(connect(`redis://admin:s3cret@127.0.0.1:${guarded.port}`));
    expect(safety).toEqual({ openDefaultUser: false, persistence: 'aof' });
    expect(redisSafetyWarnings(safety)).toEqual([]);
  });

  it('tells RDB save points apart from no persistence', () => {
    expect(redisSafetyWarnings({ openDefaultUser: false, persistence: 'rdb' })).toEqual([]);
    expect(redisSafetyWarnings({ openDefaultUser: 'unknown', persistence: 'unknown' })).toEqual([]);
  });
});
