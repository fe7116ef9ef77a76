import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';
import { JobNotFoundError } from './job-not-found.js';

// A job whose record vanishes under a waiting SDK (Redis restarted empty): a private
// redis-server, flushed. No services run: the record alone is what wait() and follow() watch.
describe('SDK when the job vanishes', () => {
  const own = usePrivateRedis();
  let client: SandstreamClient;
  beforeAll(async () => {
    client = new SandstreamClient({ redisUrl: own.server.url, namespace: 'vanish' });
  });
  afterAll(async () => {
    await client?.close();
  });

  it('follow() ends with JobNotFoundError saying Redis may have lost its data; wait() throws it too', async () => {
    const { jobId } = await client.submit({ id: 'vanish-1', image: 'none', steps: [{ command: 'true' }] });
    const timeline = client.follow(jobId)[Symbol.asyncIterator]();
    expect((await timeline.next()).value).toMatchObject({ type: 'state', to: 'queued' });
    const next = timeline.next();
    const waited = client.wait(jobId).catch((err: unknown) => err);
    await own.redis.flushall();
    const err = await next.catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobNotFoundError);
    expect((err as JobNotFoundError).vanished).toBe(true);
    expect((err as Error).message).toBe('job vanish-1 not found (Redis lost its data?)');
    expect(await waited).toBeInstanceOf(JobNotFoundError);
  });

  it('wait() on an id that never named a job throws JobNotFoundError without the hint', async () => {
    const err = await client.wait('never-there').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JobNotFoundError);
    expect((err as JobNotFoundError).vanished).toBe(false);
  });
});
