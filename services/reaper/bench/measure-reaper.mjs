#!/usr/bin/env node
// Measures one reaper pass over many finished jobs against the local Redis with the built
// packages (npx tsc -b services/reaper first). Own namespace and job-id glob: it never sees
// anyone else's keys.
import { createKeySpace, DispatchKeys, ExpiredLeases, JobStore, parseJobSpec } from '@sandstream/bus';
import { Reaper } from '@sandstream/reaper';
import { silentLogger } from '@sandstream/telemetry';
import { Redis } from 'ioredis';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const N = Number(process.env.JOBS ?? 5000);
const LIVE = 500;
const ns = `bench-reap-${Math.random().toString(36).slice(2, 8)}`;
const keys = createKeySpace(ns);
const redis = new Redis(url, { maxRetriesPerRequest: null });
const store = new JobStore({ redis, keys });
const logger = silentLogger('bench');

const spec = (id) => parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] });
for (let i = 0; i < N + LIVE; i++) {
  const id = `${ns}-${i}`;
  await store.create(spec(id));
  if (i < N) await store.transition(id, ['queued'], 'succeeded');
  await redis.xadd(keys.sandbox(id).events, '*', 'event', '{"line":"x"}');
}
const reaper = new Reaper({
  redis,
  keys,
  store,
  leases: new ExpiredLeases({ redis, keys }),
  dispatchKeys: new DispatchKeys(keys, 4),
  logger,
  retentionMs: 0,
  orphanGraceMs: 600_000,
  sandboxGraceMs: 0,
  startingTimeoutMs: 600_000,
  heartbeatGraceMs: 600_000,
  jobIdGlob: `${ns}-*`,
  scanCount: 200,
  pauseMs: 10,
  now: () => Date.now() + 1000,
});
const t0 = performance.now();
const report = await reaper.runOnce();
const ms = performance.now() - t0;
console.log(
  `reaper: one pass over ${N + LIVE} jobs (${N} finished) deleted ${report.jobsDeleted} jobs in ${ms.toFixed(0)} ms ` +
    `= ${((report.jobsDeleted / ms) * 1000).toFixed(0)} jobs/s (SCAN COUNT 200, 10 ms pause per batch); live left: ` +
    `${(await store.list({ state: 'queued', limit: 1000 })).length}`,
);
for (let i = N; i < N + LIVE; i++) await store.delete(`${ns}-${i}`, 'acme');
const rest = await redis.keys(`*${ns}*`);
if (rest.length) await redis.unlink(...rest);
redis.disconnect();
