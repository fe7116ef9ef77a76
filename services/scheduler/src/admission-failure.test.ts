import {
  bullJobId,
  createKeySpace,
  type JobSpec,
  JobStore,
  parseJobSpec,
  QueueNames,
  SlotAdmission,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { failExhaustedAdmission } from './admission-failure.js';
import { createScheduleProcessor } from './schedule-job.js';
import { TemplateResolver } from './template-resolver.js';

const url = testRedisUrl();
const logger = silentLogger('sched-test');
const redis = new Redis(url, { maxRetriesPerRequest: null });
const ns = `t-admfail-${Math.random().toString(36).slice(2, 10)}`;
const keys = createKeySpace(ns);

afterAll(async () => {
  await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

/** A template source that is down: not a bad template, an outage (retried, then given up). */
class UnreachableResolver extends TemplateResolver {
  override async resolve(_spec: JobSpec): Promise<never> {
    throw new Error('template registry unreachable: connection refused');
  }
}

describe('admission that keeps failing', () => {
  it('retries, then ends the job failed with the last error and gives its slot back', async () => {
    const store = new JobStore({ redis, keys });
    const leases = new SlotAdmission({ redis, keys, globalLimit: 5, tenantLimit: 5, leaseMs: 60_000 });
    const jobsQueue = new Queue(QueueNames.jobs, { connection: redis, prefix: keys.bullPrefix });
    const createQueue = new Queue(QueueNames.sandboxCreate, { connection: redis, prefix: keys.bullPrefix });
    const processor = createScheduleProcessor({
      store,
      leases,
      redis,
      keys,
      createQueue,
      resolver: new UnreachableResolver(),
      logger,
      recheckMs: 60_000,
    });
    const worker = new Worker(QueueNames.jobs, processor, {
      connection: new Redis(url, { maxRetriesPerRequest: null }),
      prefix: keys.bullPrefix,
    });
    const ended = new Promise<boolean>((resolve) => {
      worker.on('failed', (job, err) => {
        void failExhaustedAdmission({ store, leases, logger }, job, err).then(
          (done) => done && resolve(true),
        );
      });
    });
    try {
      const id = `${ns}-job`;
      // As submitParsedJob does, with a short backoff to keep the test quick.
      await store.create(parseJobSpec({ id, image: 'x', steps: [{ command: 'true' }] }));
      await jobsQueue.add(
        'job',
        { jobId: id },
        { jobId: bullJobId(id), attempts: 3, backoff: { type: 'fixed', delay: 50 } },
      );
      await ended;
      const record = await store.get(id);
      expect(record?.state).toBe('failed');
      expect(record?.reason).toBe(
        'admission failed after 3 attempts: template registry unreachable: connection refused',
      );
      expect(await leases.inUse()).toBe(0);
      expect(await createQueue.count()).toBe(0);
    } finally {
      await worker.close();
      await jobsQueue.obliterate({ force: true });
      await jobsQueue.close();
      await createQueue.close();
    }
  });
});
