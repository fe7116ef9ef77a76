import {
  createKeySpace,
  type JobState,
  JobStore,
  QueueNames,
  SlotAdmission,
  submitJob,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys } from '@sandstream/test-support';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { CapacityWaker } from './capacity-waker.js';
import { createScheduleProcessor } from './schedule-job.js';
import { TemplateResolver } from './template-resolver.js';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const logger = silentLogger('scheduler-test');
const cleanups: (() => Promise<void>)[] = [];

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function harness(opts: { globalLimit: number; tenantLimit: number }) {
  const ns = `t-sched-${Math.random().toString(36).slice(2, 10)}`;
  const keys = createKeySpace(ns);
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  const workerRedis = new Redis(url, { maxRetriesPerRequest: null });
  const blocking = new Redis(url, { maxRetriesPerRequest: null });
  const prefix = keys.bullPrefix;
  const store = new JobStore({ redis, keys });
  const leases = new SlotAdmission({ redis, keys, ...opts, leaseMs: 60_000 });
  const jobsQueue = new Queue(QueueNames.jobs, { connection: redis, prefix });
  const createQueue = new Queue(QueueNames.sandboxCreate, { connection: redis, prefix });
  let attempts = 0;
  const processor = createScheduleProcessor({
    store,
    leases,
    redis,
    keys,
    createQueue,
    resolver: new TemplateResolver(),
    logger,
    recheckMs: 60_000, // long: any progress in these tests must come from wake-ups, not re-polls
  });
  const worker = new Worker(
    QueueNames.jobs,
    async (job, token) => {
      attempts++;
      return processor(job, token);
    },
    { connection: workerRedis, prefix, concurrency: 1, autorun: false },
  );
  const waker = new CapacityWaker({ blockingRedis: blocking, redis, keys, jobsQueue, logger });
  const jobIds: string[] = [];
  cleanups.push(async () => {
    await waker.stop();
    await worker.close();
    await jobsQueue.obliterate({ force: true });
    await createQueue.obliterate({ force: true });
    await jobsQueue.close();
    await createQueue.close();
    for (const id of jobIds) await store.delete(id);
    await deleteNamespaceKeys(redis, ns);
    redis.disconnect();
    workerRedis.disconnect();
    blocking.disconnect();
  });
  const submit = async (
    name: string,
    tenant: string,
    priority: number,
    extra: Record<string, unknown> = {},
  ) => {
    const id = `${ns}-${name}`;
    jobIds.push(id);
    await submitJob(store, jobsQueue, {
      id,
      tenant,
      priority,
      image: 'debian',
      steps: [{ command: 'true' }],
      ...extra,
    });
    return id;
  };
  const state = async (id: string) => (await store.get(id))?.state;
  const waitFor = (id: string, want: JobState, ms = 5000) =>
    expect.poll(() => state(id), { timeout: ms, interval: 25, message: `state of ${id}` }).toBe(want);
  return {
    keys,
    redis,
    store,
    leases,
    worker,
    waker,
    createQueue,
    submit,
    state,
    waitFor,
    attempts: () => attempts,
  };
}

describe('scheduler admission', () => {
  it('admits by priority up to the global limit; the rest wait without polling; a freed slot wakes the best waiter', async () => {
    const h = await harness({ globalLimit: 2, tenantLimit: 10 });
    const a = await h.submit('a', 'acme', 50);
    const b = await h.submit('b', 'acme', 50);
    const c = await h.submit('c', 'acme', 10);
    const d = await h.submit('d', 'acme', 90);
    h.worker.run();
    h.waker.start();
    await h.waitFor(d, 'scheduled');
    await h.waitFor(a, 'scheduled');
    await new Promise((r) => setTimeout(r, 300));
    expect(await h.state(b)).toBe('queued');
    expect(await h.state(c)).toBe('queued');
    expect(await h.createQueue.getJobCountByTypes('waiting', 'prioritized')).toBe(2);
    expect(await h.redis.zrange(h.keys.capacityWaiting, 0, -1)).toEqual([b, c]);

    // No busy polling: while nothing frees up, nothing is re-tried.
    const before = h.attempts();
    await new Promise((r) => setTimeout(r, 1500));
    expect(h.attempts()).toBe(before);

    // pod-lifecycle frees a's slot at the end of its job: b (better rank than c) gets it.
    expect(await h.leases.release(a, 'acme')).toBe(true);
    await h.waitFor(b, 'scheduled');
    await new Promise((r) => setTimeout(r, 300));
    expect(await h.state(c)).toBe('queued');
    expect(await h.leases.inUse()).toBe(2);
  });

  it('holds each tenant to its own limit while other tenants proceed', async () => {
    const h = await harness({ globalLimit: 10, tenantLimit: 1 });
    const a1 = await h.submit('a1', 'alpha', 50);
    const a2 = await h.submit('a2', 'alpha', 50);
    const b1 = await h.submit('b1', 'beta', 50);
    h.worker.run();
    h.waker.start();
    await h.waitFor(a1, 'scheduled');
    await h.waitFor(b1, 'scheduled');
    await new Promise((r) => setTimeout(r, 300));
    expect(await h.state(a2)).toBe('queued');
    expect(await h.leases.inUse('alpha')).toBe(1);
  });

  it('fails a template job when no registry is configured, naming the template, and frees the slot', async () => {
    const h = await harness({ globalLimit: 1, tenantLimit: 1 });
    const t = await h.submit('tpl', 'acme', 50, { image: undefined, template: 'node20' });
    h.worker.run();
    await h.waitFor(t, 'failed');
    expect((await h.store.get(t))?.reason).toContain('template "node20" cannot be resolved');
    // The slot is released just after the job is marked failed: wait for it, not a race.
    await expect.poll(() => h.leases.inUse(), { timeout: 10_000 }).toBe(0);
  });

  it('cancels a job whose cancel was requested while it waited for capacity', async () => {
    const h = await harness({ globalLimit: 1, tenantLimit: 10 });
    const first = await h.submit('first', 'acme', 50);
    const second = await h.submit('second', 'acme', 50);
    h.worker.run();
    h.waker.start();
    await h.waitFor(first, 'scheduled');
    await new Promise((r) => setTimeout(r, 200));
    expect(await h.store.requestCancel(second, 'user gave up')).toEqual({ status: 'cancelled' });
    await h.leases.release(first, 'acme');
    await new Promise((r) => setTimeout(r, 500));
    expect(await h.state(second)).toBe('cancelled');
    expect(await h.leases.inUse()).toBe(0);
    // The cancelled waiter left the waiting set: it cannot soak up later wake-ups.
    expect(await h.redis.zcard(h.keys.capacityWaiting)).toBe(0);
  });
});
