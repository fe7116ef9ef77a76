import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, type RedisClient } from './redis-connection.js';
import {
  aofReplayVerdict,
  checkRedisAtStart,
  inspectRedisSafety,
  type RedisSafety,
  redisSafetyWarnings,
  replayDropsTransactions,
} from './redis-safety.js';

const ADMIN = ['--user', 'admin', 'on', '>s3cret', '~*', '&*', '+@all'];

describe('inspectRedisSafety', () => {
  let open: RedisServer;
  let defaultOn: RedisServer;
  let defaultOffNoPerms: RedisServer;
  let defaultOffAllPerms: RedisServer;
  const clients: RedisClient[] = [];
  beforeAll(async () => {
    [open, defaultOn, defaultOffNoPerms, defaultOffAllPerms] = await Promise.all([
      // What the machine's Redis looks like: default user open, nothing on disk.
      startRedisServer(),
      // AOF, default on with a password: replays as `default`, which may do everything.
      startRedisServer({
        appendOnly: true,
        args: ['--user', 'default', 'on', '>pw', '~*', '&*', '+@all', ...ADMIN],
      }),
      // What the shipped configurations had: AOF, `default` off without permissions.
      startRedisServer({ appendOnly: true, args: ['--user', 'default', 'off', ...ADMIN] }),
      // The fixed form: `default` off (nobody logs in) with every permission.
      startRedisServer({
        appendOnly: true,
        args: ['--user', 'default', 'off', '~*', '&*', '+@all', ...ADMIN],
      }),
    ]);
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all([open, defaultOn, defaultOffNoPerms, defaultOffAllPerms].map((s) => s?.stop()));
  });
  const connect = (server: RedisServer, user = 'admin:s3cret') => {
    const client = createRedis({ url: `redis://${user}@127.0.0.1:${server.port}`, role: 'producer' });
    clients.push(client);
    return client;
  };
  const version = (safety: RedisSafety) => (safety.server === 'unknown' ? '' : safety.server.version);

  it('warns about an open default user and about a Redis that keeps nothing', async () => {
    const client = createRedis({ url: open.url, role: 'producer' });
    clients.push(client);
    const safety = await inspectRedisSafety(client);
    expect(safety).toMatchObject({
      openDefaultUser: true,
      persistence: 'none',
      defaultUserPermissions: 'all',
    });
    const warnings = redisSafetyWarnings(safety);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(
      /`default` user with no password: anything that can reach it has full rights/,
    );
    expect(warnings[1]).toMatch(/a Redis restart loses every job/);
  });

  it('default on with permissions: starts, nothing to say', async () => {
    const safety = await inspectRedisSafety(connect(defaultOn));
    expect(safety).toMatchObject({
      openDefaultUser: false,
      persistence: 'aof',
      defaultUserPermissions: 'all',
    });
    expect(aofReplayVerdict(safety)).toBe('safe');
    expect(await checkRedisAtStart(connect(defaultOn), { allowUnsafeAcl: false })).toEqual({
      refusal: null,
      warnings: [],
    });
  });

  it('AOF on, a version that drops replayed transactions, default off without permissions: refused, with the fix', async () => {
    const safety = await inspectRedisSafety(connect(defaultOffNoPerms));
    expect(safety).toMatchObject({
      openDefaultUser: false,
      persistence: 'aof',
      defaultUserPermissions: 'restricted',
    });
    expect(safety.server).toMatchObject({ name: 'redis' });
    // The machine's Redis is 7.0.x: affected.
    expect(replayDropsTransactions(safety.server)).toBe(true);
    const check = await checkRedisAtStart(connect(defaultOffNoPerms), { allowUnsafeAcl: false });
    expect(check.refusal).toContain(`redis ${version(safety)} keeps an append-only file`);
    expect(check.refusal).toContain('user default off ~* &* +@all');
    expect(check.refusal).toContain('SANDSTREAM_ALLOW_UNSAFE_REDIS_ACL=1');
    // The override turns the refusal into a warning.
    const allowed = await checkRedisAtStart(connect(defaultOffNoPerms), { allowUnsafeAcl: true });
    expect(allowed.refusal).toBeNull();
    expect(allowed.warnings.join('\n')).toMatch(/drops it, so a restart loses every job.*starting anyway/);
  });

  it('default off with every permission (the shipped form): starts, nothing to say', async () => {
    const safety = await inspectRedisSafety(connect(defaultOffAllPerms));
    expect(safety).toMatchObject({
      openDefaultUser: false,
      persistence: 'aof',
      defaultUserPermissions: 'all',
    });
    expect(await checkRedisAtStart(connect(defaultOffAllPerms), { allowUnsafeAcl: false })).toEqual({
      refusal: null,
      warnings: [],
    });
  });

  it('a user refused ACL commands (a managed Redis): unknown, a warning, never a refusal', async () => {
    const admin = connect(defaultOffNoPerms);
    await admin.call('ACL', 'SETUSER', 'tenant', 'on', '>t', '~*', '&*', '+@all', '-acl');
    const check = await checkRedisAtStart(connect(defaultOffNoPerms, 'tenant:t'), { allowUnsafeAcl: false });
    expect(check.refusal).toBeNull();
    expect(check.warnings).toHaveLength(1);
    expect(check.warnings[0]).toMatch(
      /could not tell whether redis .* drops transactions.*ACL GETUSER and ACL LIST refused/,
    );
    expect(check.warnings[0]).toContain('user default off ~* &* +@all');
  });

  it('only versions known to carry the fix (Redis 8.8 and later) pass', () => {
    const redis = (v: string) => replayDropsTransactions({ name: 'redis', version: v });
    expect(['6.2.14', '7.0.15', '7.2.4', '7.4.2', '8.0.3', '8.4.1', '8.6.2'].map(redis)).toEqual(
      Array(7).fill(true),
    );
    expect(['8.8.0', '8.10.2', '9.0.0'].map(redis)).toEqual([false, false, false]);
    expect(replayDropsTransactions({ name: 'valkey', version: '9.0.0' })).toBe(true);
    expect(replayDropsTransactions('unknown')).toBe('unknown');
    const base: RedisSafety = {
      openDefaultUser: false,
      persistence: 'aof',
      server: { name: 'redis', version: '7.2.4' },
      defaultUserPermissions: 'restricted',
    };
    expect(aofReplayVerdict(base)).toBe('unsafe');
    expect(aofReplayVerdict({ ...base, server: { name: 'redis', version: '8.8.1' } })).toBe('safe');
    expect(aofReplayVerdict({ ...base, persistence: 'rdb' })).toBe('safe');
    expect(aofReplayVerdict({ ...base, server: 'unknown' })).toBe('unknown');
    expect(aofReplayVerdict({ ...base, persistence: 'unknown' })).toBe('unknown');
    expect(redisSafetyWarnings({ ...base, persistence: 'rdb' })).toEqual([]);
  });
});
