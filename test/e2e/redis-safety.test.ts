import {
  freePort,
  type RedisServer,
  type RunningService,
  type ServiceName,
  startRedisServer,
  startService,
  uniqueNamespace,
} from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';

// Every service tells its operator, at start, when the Redis it was given lets anyone in as
// `default` or keeps nothing on disk (issue: first contact, "its own Redis").
describe('services warn about an unsafe Redis', () => {
  let redis: RedisServer | undefined;
  const services: RunningService[] = [];
  afterAll(async () => {
    await Promise.all(services.map((s) => s.stop()));
    await redis?.stop();
  });

  it('each of the four logs both warnings for an open, unpersisted Redis', async () => {
    redis = await startRedisServer();
    const namespace = uniqueNamespace('safety');
    const names: ServiceName[] = ['scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper'];
    for (const name of names) {
      services.push(
        await startService(name, {
          REDIS_URL: redis.url,
          SANDSTREAM_NAMESPACE: namespace,
          SANDBOX_TYPE: 'inprocess',
        }),
      );
    }
    for (const service of services) {
      await expect
        .poll(() => service.output(), { timeout: 20_000 })
        .toMatch(/with no password: anything that can reach it has full rights/);
      await expect
        .poll(() => service.output(), { timeout: 20_000 })
        .toMatch(/a Redis restart loses every job/);
    }
  }, 120_000);
});

// Every service refuses, before it takes work, a Redis that would drop every job on its next
// restart: AOF on, a version that drops replayed transactions (the machine's 7.0), and a
// `default` user without permissions (docs/reliability.md, "`default` off, but with its
// permissions"). The override starts it with the refusal as a warning.
describe('services refuse a Redis that would lose its transactions on restart', () => {
  let redis: RedisServer | undefined;
  const started: RunningService[] = [];
  afterAll(async () => {
    await Promise.all(started.map((s) => s.stop()));
    await redis?.stop();
  });
  const NAMES: ServiceName[] = ['scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper', 'api'];

  it('each of the five exits 1 with the fix in the message; SANDSTREAM_ALLOW_UNSAFE_REDIS_ACL=1 starts it', async () => {
    redis = await startRedisServer({
      appendOnly: true,
      args: ['--user', 'default', 'off', '--user', 'admin', 'on', '>pw', '~*', '&*', '+@all'],
    });
    const env = async () => ({
      REDIS_URL: `redis://admin:pw@127.0.0.1:${redis?.port}`,
      SANDSTREAM_NAMESPACE: uniqueNamespace('refuse'),
      SANDBOX_TYPE: 'inprocess',
      API_PORT: String(await freePort()),
    });
    const outcomes = await Promise.all(
      NAMES.map(async (name) =>
        startService(name, await env()).then(
          (service) => {
            started.push(service);
            return `${name} started`;
          },
          (err: Error) => err.message,
        ),
      ),
    );
    for (const [i, outcome] of outcomes.entries()) {
      expect(outcome).toContain(`${NAMES[i]} exited with 1`);
      expect(outcome).toContain('failed to start');
      expect(outcome).toMatch(/keeps an append-only file and its `default` user has no permissions/);
      expect(outcome).toContain('user default off ~* &* +@all');
      expect(outcome).toContain('SANDSTREAM_ALLOW_UNSAFE_REDIS_ACL=1');
    }
    const overridden = await startService('scheduler', {
      ...(await env()),
      SANDSTREAM_ALLOW_UNSAFE_REDIS_ACL: '1',
    });
    started.push(overridden);
    expect(overridden.output()).toMatch(/a restart loses every job .*starting anyway/);
  }, 120_000);
});
