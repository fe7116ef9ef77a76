#!/usr/bin/env node
// Measures the scheduler's admission path against the local Redis with the built packages
// (npx tsc -b services/scheduler first): admission throughput of one replica, and the latency
// from a slot being freed to the best waiting job being scheduled. Uses its own namespace and
// removes its keys afterwards.
import {
  createKeySpace,
  JobStore,
  parseJobSpec,
  QueueNames,
  SlotAdmission,
  submitParsedJob,
} from '@sandstream/bus';
import { CapacityWaker, createScheduleProcessor, TemplateResolver } from '@sandstream/scheduler';
import { silentLogger } from '@sandstream/telemetry';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const N = Number(process.env.JOBS ?? 1000);
const logger = silentLogger('bench');

async function harness(globalLimit) {
  const ns = `bench-${Math.random().toString(36).slice(2, 8)}`;
  const keys = createKeySpace(ns);
  const redis = new Redis(url, { maxRetriesPerRequest: null });
  const conns = [redis];
  const conn = () => {
    const c = new Redis(url, { maxRetriesPerRequest: null });
    conns.push(c);
    return c;
  };
  const store = new JobStore({ redis, keys });
  const leases = new SlotAdmission({ redis, keys, globalLimit, tenantLimit: globalLimit, leaseMs: 600_000 });
  const jobsQueue = new Queue(QueueNames.jobs, { connection: redis, prefix: keys.bullPrefix });
  const createQueue = new Queue(QueueNames.sandboxCreate, { connection: redis, prefix: keys.bullPrefix });
  const processor = createScheduleProcessor({
    store,
    leases,
    redis,
    keys,
    createQueue,
    resolver: new TemplateResolver(),
    logger,
    recheckMs: 600_000,
  });
  const worker = new Worker(QueueNames.jobs, processor, {
    connection: conn(),
    prefix: keys.bullPrefix,
    concurrency: 10,
    autorun: false,
  });
  const waker = new CapacityWaker({ blockingRedis: conn(), redis, keys, jobsQueue, logger });
  const ids = [];
  return {
    ns,
    keys,
    redis,
    store,
    leases,
    jobsQueue,
    worker,
    waker,
    ids,
    async submit(i, priority = 50) {
      const id = `${ns}-${i}`;
      ids.push(id);
      await submitParsedJob(
        store,
        jobsQueue,
        parseJobSpec({ id, tenant: 'acme', priority, image: 'x', steps: [{ command: 'true' }] }),
      );
      return id;
    },
    async close() {
      await waker.stop();
      await worker.close();
      await jobsQueue.obliterate({ force: true });
      await createQueue.obliterate({ force: true });
      await jobsQueue.close();
      await createQueue.close();
      for (const id of ids) await store.delete(id, 'acme');
      const rest = await redis.keys(`*${ns}*`);
      if (rest.length) await redis.unlink(...rest);
      for (const c of conns) c.disconnect();
    },
  };
}

const h1 = await harness(N + 10);
for (let i = 0; i < N; i++) await h1.submit(i);
const t0 = performance.now();
h1.worker.run();
while ((await h1.redis.zcard(h1.keys.jobsByState('scheduled'))) < N)
  await new Promise((r) => setTimeout(r, 20));
const admitMs = performance.now() - t0;
console.log(
  `admission: ${N} jobs in ${admitMs.toFixed(0)} ms = ${((N / admitMs) * 1000).toFixed(0)} jobs/s (one replica, concurrency 10)`,
);
await h1.close();

const h2 = await harness(1);
h2.worker.run();
h2.waker.start();
const holder = await h2.submit('holder');
while ((await h2.store.get(holder))?.state !== 'scheduled') await new Promise((r) => setTimeout(r, 5));
const samples = [];
let current = holder;
for (let i = 0; i < 20; i++) {
  const next = await h2.submit(`w${i}`);
  while (!(await h2.redis.zscore(h2.keys.capacityWaiting, next))) await new Promise((r) => setTimeout(r, 2));
  await new Promise((r) => setTimeout(r, 20));
  const t = performance.now();
  await h2.leases.release(current, 'acme');
  while ((await h2.store.get(next))?.state !== 'scheduled') await new Promise((r) => setTimeout(r, 1));
  samples.push(performance.now() - t);
  current = next;
}
samples.sort((a, b) => a - b);
console.log(
  `wake-up: slot freed -> waiting job scheduled: median ${samples[10].toFixed(1)} ms, max ${samples[19].toFixed(1)} ms (20 samples)`,
);
await h2.close();
