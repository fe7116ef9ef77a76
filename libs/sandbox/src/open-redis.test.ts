import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxStartError } from './backend.js';
import { dockerOptionsFromEnv } from './backend-env.js';
import { kubernetesSettingsFromEnv } from './kubernetes/kubernetes-env.js';
import { OpenRedisGuard, probeDefaultUser } from './open-redis.js';

// Real redis-servers: the stock one (default user on, no password) and one with it switched off.
describe('open default user guard', () => {
  let open: RedisServer;
  let closed: RedisServer;
  beforeAll(async () => {
    [open, closed] = await Promise.all([startRedisServer(), startRedisServer()]);
    const admin = new Redis(closed.url);
    await admin.call('ACL', 'SETUSER', 'admin', 'on', '>pw', '~*', '&*', '+@all');
    await admin.call('ACL', 'SETUSER', 'default', 'off');
    admin.disconnect();
  });
  afterAll(async () => {
    await Promise.all([open?.stop(), closed?.stop()]);
  });

  it('tells open, closed and unreachable apart without credentials, ignoring the ones in the URL', async () => {
    expect(await probeDefaultUser(open.url)).toBe('open');
    expect(await probeDefaultUser(`redis://admin:pw@127.0.0.1:${closed.port}`)).toBe('closed');
    expect(await probeDefaultUser('redis://127.0.0.1:1', 500)).toBe('unreachable');
  });

  it('refuses with the fix and the override named, unless allowed', async () => {
    const err = await new OpenRedisGuard({ backend: 'kubernetes' }).check(open.url).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxStartError);
    expect((err as Error).message).toMatch(
      /open "default" user.*ACL SETUSER default off.*SANDSTREAM_ALLOW_OPEN_REDIS=1/,
    );
    await new OpenRedisGuard({ backend: 'kubernetes', allowOpenRedis: true }).check(open.url);
    await new OpenRedisGuard({ backend: 'kubernetes' }).check(`redis://admin:pw@127.0.0.1:${closed.port}`);
  });

  it('reads SANDSTREAM_ALLOW_OPEN_REDIS for both backends and refuses a typo', () => {
    const carrier = { SANDSTREAM_AGENT_CARRIER_IMAGE: 'carrier:1' };
    expect(kubernetesSettingsFromEnv({ ...carrier, SANDSTREAM_ALLOW_OPEN_REDIS: '1' }).allowOpenRedis).toBe(
      true,
    );
    expect(kubernetesSettingsFromEnv(carrier).allowOpenRedis).toBeUndefined();
    expect(dockerOptionsFromEnv({ SANDSTREAM_ALLOW_OPEN_REDIS: 'true' }).allowOpenRedis).toBe(true);
    expect(dockerOptionsFromEnv({ SANDSTREAM_ALLOW_OPEN_REDIS: '0' }).allowOpenRedis).toBeUndefined();
    expect(() => dockerOptionsFromEnv({ SANDSTREAM_ALLOW_OPEN_REDIS: 'yes' })).toThrow(
      /SANDSTREAM_ALLOW_OPEN_REDIS must be 1, true, 0 or false/,
    );
  });
});
