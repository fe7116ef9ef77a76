import {
  createKeySpace,
  type JobState,
  JobStore,
  parseJobSpec,
  QueueNames,
  SlotAdmission,
  submitParsedJob,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { CapacityWaker } from './capacity-waker.js';
import { createScheduleProcessor } from './schedule-job.js';
import { TemplateResolver } from './template-resolver.js';

const url = testRedisUrl();
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
  // Admission runs that ended, per job id (a run that parks the job ends with DelayedError):
  // the event that proves a waiting job was looked at, instead of sleeping and hoping it was.
  const settled = new Map<string, number>();
  // The waker's completed BLPOP rounds (each blocks up to 1 s in Redis when nothing is freed).
  let wakerRounds = 0;
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
      try {
        return await processor(job, token);
      } finally {
        const id = String(job.data.jobId);
        settled.set(id, (settled.get(id) ?? 0) + 1);
      }
    },
    { connection: workerRedis, prefix, concurrency: 1, autorun: false },
  );
  const waker = new CapacityWaker({
    blockingRedis: blocking,
    redis,
    keys,
    admission: leases,
    store,
    jobsQueue,
    logger,
    onProgress: () => {
      wakerRounds++;
    },
  });
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
    await submitParsedJob(
      store,
      jobsQueue,
      parseJobSpec({ id, tenant, priority, image: 'debian', steps: [{ command: 'true' }], ...extra }),
    );
    return id;
  };
  const state = async (id: string) => (await store.get(id))?.state;
  const waitFor = (id: string, want: JobState, ms = 5000) =>
    expect.poll(() => state(id), { timeout: ms, interval: 25, message: `state of ${id}` }).toBe(want);
  /** Resolves once admission has finished `runs` times for this job. */
  const waitSettled = (id: string, runs = 1) =>
    expect.poll(() => settled.get(id) ?? 0, { timeout: 10_000 }).toBeGreaterThanOrEqual(runs);
  /** Resolves after `rounds` more idle-or-not waker rounds from now. */
  const waitWakerRounds = async (rounds: number) => {
    const target = wakerRounds + rounds;
    await expect.poll(() => wakerRounds, { timeout: 15_000 }).toBeGreaterThanOrEqual(target);
  };
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
    waitSettled,
    waitWakerRounds,
    attempts: () => attempts,
    /** Admission runs that ended for this job so far. */
    runs: (id: string) => settled.get(id) ?? 0,
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
    // b and c were each looked at and refused (not merely not reached yet).
    await h.waitSettled(b);
    await h.waitSettled(c);
    expect(await h.state(b)).toBe('queued');
    expect(await h.state(c)).toBe('queued');
    expect(await h.createQueue.getJobCountByTypes('waiting', 'prioritized')).toBe(2);
    expect(await h.redis.zrange(h.keys.capacityWaiting, 0, -1)).toEqual([b, c]);

    // No busy polling: while nothing frees up, nothing is re-tried. Two more waker rounds (each
    // a BLPOP that timed out in Redis after 1 s) is time in which any re-poll would have shown.
    const before = h.attempts();
    const promotedBefore = h.waker.promoted;
    await h.waitWakerRounds(2);
    expect(h.attempts()).toBe(before);
    expect(h.waker.promoted).toBe(promotedBefore);

    // pod-lifecycle frees a's slot at the end of its job: b (better rank than c) gets it.
    expect(await h.leases.release(a, 'acme')).toBe(true);
    await h.waitFor(b, 'scheduled');
    // One slot, one wake-up: c is not re-tried for a slot it cannot have. Two more waker rounds
    // are time in which a second wake-up would have shown.
    await h.waitWakerRounds(2);
    expect(h.runs(b)).toBe(2);
    expect(h.runs(c)).toBe(1);
    expect(await h.state(c)).toBe('queued');
    expect(await h.redis.zrange(h.keys.capacityWaiting, 0, -1)).toEqual([c]);
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
    await h.waitSettled(a2);
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

  it('a queued job cancelled while it waited for capacity is cancelled at once and leaves the waiting set', async () => {
    const h = await harness({ globalLimit: 1, tenantLimit: 10 });
    const first = await h.submit('first', 'acme', 50);
    const second = await h.submit('second', 'acme', 50);
    h.worker.run();
    h.waker.start();
    await h.waitFor(first, 'scheduled');
    // second was refused and parked: it waits for capacity now.
    await h.waitSettled(second);
    expect(await h.redis.zrange(h.keys.capacityWaiting, 0, -1)).toEqual([second]);
    expect(await h.store.requestCancel(second, 'user gave up')).toEqual({ status: 'cancelled' });
    await h.leases.release(first, 'acme');
    // The freed slot's wake-up finds second cancelled: it leaves the waiting set (it cannot soak
    // up later wake-ups) and is neither given the slot nor woken for nothing.
    await expect.poll(() => h.redis.zcard(h.keys.capacityWaiting), { timeout: 10_000 }).toBe(0);
    expect(await h.state(second)).toBe('cancelled');
    expect(await h.leases.inUse()).toBe(0);
    expect(h.runs(second)).toBe(1);
  });

  it('cancels a job whose cancel was requested while it waited for capacity', async () => {
    // A cancel request on a queued job cancels it in the same Lua step, so the scheduler's own
    // cancel check only matters for a job already `scheduled` that comes back to admission: a
    // scheduler that died after queued -> scheduled (and whose lease the reaper reclaimed)
    // leaves exactly that, and the redelivered job may then wait for capacity. A cancel that
    // arrives meanwhile is only recorded; admission must honour it when the job is woken.
    const h = await harness({ globalLimit: 1, tenantLimit: 10 });
    const first = await h.submit('first', 'acme', 90);
    const second = await h.submit('second', 'acme', 50);
    expect(await h.store.transition(second, ['queued'], 'scheduled')).toMatchObject({ status: 'ok' });
    h.worker.run();
    h.waker.start();
    await h.waitFor(first, 'scheduled');
    await h.waitSettled(second);
    expect(await h.redis.zrange(h.keys.capacityWaiting, 0, -1)).toEqual([second]);
    expect(await h.store.requestCancel(second, 'user gave up')).toEqual({
      status: 'requested',
      state: 'scheduled',
    });
    await h.leases.release(first, 'acme');
    await h.waitSettled(second, 2);
    expect(await h.state(second)).toBe('cancelled');
    expect((await h.store.get(second))?.reason).toBe('user gave up');
    expect(await h.leases.inUse()).toBe(0);
    expect(await h.redis.zcard(h.keys.capacityWaiting)).toBe(0);
    // Only first was handed to pod-lifecycle.
    expect(await h.createQueue.getJobCountByTypes('waiting', 'prioritized')).toBe(1);
  });

  it('wakes a waiter of another tenant past those whose tenant is full, and wakes them not', async () => {
    const h = await harness({ globalLimit: 2, tenantLimit: 1 });
    const a1 = await h.submit('a1', 'alpha', 50);
    const b1 = await h.submit('b1', 'beta', 50);
    h.worker.run();
    h.waker.start();
    await h.waitFor(a1, 'scheduled');
    await h.waitFor(b1, 'scheduled');
    const a2 = await h.submit('a2', 'alpha', 90); // best rank, but alpha is full
    const b2 = await h.submit('b2', 'beta', 10);
    const c1 = await h.submit('c1', 'gamma', 10);
    for (const id of [a2, b2, c1]) await h.waitSettled(id);
    expect(await h.redis.zrange(h.keys.capacityWaiting, 0, -1)).toEqual([a2, b2, c1]);

    // One global slot frees up, in beta: b2 can take it; a2 (alpha full) and c1 (ranked after
    // b2) cannot, and are left alone.
    expect(await h.leases.release(b1, 'beta')).toBe(true);
    await h.waitFor(b2, 'scheduled');
    await h.waitWakerRounds(2);
    expect([h.runs(a2), h.runs(b2), h.runs(c1)]).toEqual([1, 2, 1]);
    expect(await h.redis.zrange(h.keys.capacityWaiting, 0, -1)).toEqual([a2, c1]);
  });

  it('admits a burst through few slots with one wasted admission run per job at most', async () => {
    const h = await harness({ globalLimit: 3, tenantLimit: 100 });
    const ids: string[] = [];
    for (let i = 0; i < 15; i++) ids.push(await h.submit(`burst-${i}`, 'acme', 50));
    h.worker.run();
    h.waker.start();
    // Plays pod-lifecycle and the jobs: each scheduled job ends at once and gives its slot back.
    const released = new Set<string>();
    await expect
      .poll(
        async () => {
          for (const id of ids) {
            if (released.has(id) || (await h.state(id)) !== 'scheduled') continue;
            released.add(id);
            await h.leases.release(id, 'acme');
          }
          return released.size;
        },
        { timeout: 30_000, interval: 20 },
      )
      .toBe(ids.length);
    // A job runs admission once, or twice when it had to wait: its wake-up always admits it.
    // (Three waiters woken per freed slot re-parked two of them each time.)
    expect(Math.max(...ids.map((id) => h.runs(id)))).toBeLessThanOrEqual(2);
    expect(await h.redis.zcard(h.keys.capacityWaiting)).toBe(0);
    expect(await h.leases.inUse()).toBe(0);
  });
});
