import { JobStore } from '@sandstream/bus';
import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';

// The SDK as the CLI builds it (a producer connection: commands fail after a few retries) on a
// private redis-server with AOF, killed -9 and started again while wait() runs.
describe('SDK through a Redis outage', () => {
  let redis: RedisServer;
  let client: SandstreamClient;
  beforeAll(async () => {
    redis = await startRedisServer({ appendOnly: true });
    client = new SandstreamClient({ redisUrl: redis.url, namespace: 'outage' });
    client.redis.on('error', () => {});
  });
  afterAll(async () => {
    await client?.close().catch(() => undefined);
    await redis?.stop();
  });

  it('wait() keeps waiting while Redis is down and resolves once the job finishes after it is back', async () => {
    const { jobId } = await client.submit({ id: 'outage-1', image: 'none', steps: [{ command: 'true' }] });
    const timeline = client.follow(jobId)[Symbol.asyncIterator]();
    expect((await timeline.next()).value).toMatchObject({ type: 'state', to: 'queued' });
    await timeline.return(undefined);
    const waited = client.wait(jobId);
    await redis.kill();
    // Down for longer than the client's per-command retries last.
    await new Promise((r) => setTimeout(r, 5000));
    await redis.start();
    const store = new JobStore({ redis: client.redis, keys: client.keys });
    await store.transition(jobId, ['queued'], 'cancelled', { reason: 'done elsewhere' });
    expect((await waited).state).toBe('cancelled');
  }, 60_000);
});
