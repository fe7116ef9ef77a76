import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { Queue, Worker } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeySpace } from './key-space.js';
import { QueuedRequests } from './queued-requests.js';

const redis = connectTestRedis();
const keys = createKeySpace(`t-${uniqueSuffix()}`);
const cleanups: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  const found = await redis.keys(`${keys.bullPrefix}:*`);
  if (found.length) await redis.unlink(...found);
  redis.disconnect();
});

async function newestJobId(queue: Queue): Promise<string> {
  const [job] = await queue.getJobs(['waiting'], 0, 0);
  return job?.id ?? '';
}

describe('a queued request nobody answers in time', () => {
  it('fails saying no pod-lifecycle replica answered, and is withdrawn so it is not applied later', async () => {
    const queueName = `requests-${uniqueSuffix()}`;
    const requests = new QueuedRequests(redis.duplicate(), keys, queueName);
    cleanups.push(() => requests.close());
    const failure = await requests.send('update', { n: 1 }, 1_500).then(
      () => new Error('answered'),
      (err: Error) => err,
    );
    expect(failure.message).toMatch(
      /^failed: no pod-lifecycle replica answered this update request within 2 s \(it was waiting, and is withdrawn\)/,
    );
    // A replica that comes up afterwards finds nothing to apply.
    const queue = new Queue(queueName, { connection: redis.duplicate(), prefix: keys.bullPrefix });
    cleanups.push(() => queue.close());
    const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    expect(Object.values(counts).reduce((a, b) => a + b, 0)).toBe(0);
  });

  it('still gets the answer of a request that finished after the wait', async () => {
    const queueName = `requests-${uniqueSuffix()}`;
    const requests = new QueuedRequests(redis.duplicate(), keys, queueName);
    cleanups.push(() => requests.close());
    // The replica answers, but the caller's wait ended first: the finish event alone would be
    // missed; the job's state is read before giving up.
    const connection = redis.duplicate({ maxRetriesPerRequest: null });
    const worker = new Worker(queueName, async () => ({ applied: true }), {
      connection,
      prefix: keys.bullPrefix,
      autorun: false,
    });
    worker.on('error', () => {});
    cleanups.push(async () => {
      await worker.close(true);
      connection.disconnect();
    });
    const answer = requests.send('update', { n: 2 }, 1_500);
    // The job runs and completes while the caller's events listener is told nothing of it.
    const queue = new Queue(queueName, { connection: redis.duplicate(), prefix: keys.bullPrefix });
    cleanups.push(() => queue.close());
    await expect
      .poll(() => queue.getJobCounts('waiting').then((c) => c.waiting), { timeout: 10_000 })
      .toBe(1);
    const events = Reflect.get(requests, 'events') as { removeAllListeners(event: string): void };
    for (const event of ['completed', 'failed'])
      events.removeAllListeners(`${event}:${await newestJobId(queue)}`);
    worker.run().catch(() => {});
    expect(await answer).toEqual({ applied: true });
  });
});
