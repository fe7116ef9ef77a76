import { createKeySpace, JobStore, parseJobSpec, QueueNames } from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { failExhaustedStart } from './start-failure.js';

const url = testRedisUrl();
const logger = silentLogger('pl-test');
const redis = new Redis(url, { maxRetriesPerRequest: null });
const ns = `t-startfail-${Math.random().toString(36).slice(2, 10)}`;
const keys = createKeySpace(ns);

afterAll(async () => {
  await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

describe('a start that keeps failing before it can end the job itself', () => {
  it('ends the job failed after the last attempt and queues its teardown', async () => {
    const store = new JobStore({ redis, keys });
    const createQueue = new Queue(QueueNames.sandboxCreate, { connection: redis, prefix: keys.bullPrefix });
    const destroyQueue = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix: keys.bullPrefix });
    const id = `${ns}-job`;
    await store.create(parseJobSpec({ id, image: 'x', steps: [{ command: 'true' }] }));
    await store.transition(id, ['queued'], 'scheduled');
    // A processor whose every attempt dies on an error it cannot handle (as on a Redis outage).
    const worker = new Worker(
      QueueNames.sandboxCreate,
      async () => {
        throw new Error('connect ECONNREFUSED 10.0.0.7:6379');
      },
      { connection: new Redis(url, { maxRetriesPerRequest: null }), prefix: keys.bullPrefix },
    );
    const attempts: number[] = [];
    const ended = new Promise<void>((resolve) => {
      worker.on('failed', (job, err) => {
        attempts.push(job?.attemptsMade ?? -1);
        void failExhaustedStart({ store, destroyQueue, logger }, job, err).then((done) => done && resolve());
      });
    });
    try {
      await createQueue.add(
        'create',
        { jobId: id, tenant: 'default', sandbox: { image: 'x' } },
        { attempts: 3, backoff: { type: 'fixed', delay: 50 } },
      );
      await ended;
      expect(attempts).toEqual([1, 2, 3]);
      expect(await store.get(id)).toMatchObject({
        state: 'failed',
        reason: 'sandbox start failed after 3 attempts: connect ECONNREFUSED 10.0.0.7:6379',
      });
      const destroys = await destroyQueue.getJobs(['waiting']);
      expect(destroys.map((j) => j.data)).toEqual([
        expect.objectContaining({ jobId: id, outcome: 'failed' }),
      ]);
    } finally {
      await worker.close();
      for (const q of [createQueue, destroyQueue]) {
        await q.obliterate({ force: true });
        await q.close();
      }
    }
  });
});
