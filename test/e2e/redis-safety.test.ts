import {
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
