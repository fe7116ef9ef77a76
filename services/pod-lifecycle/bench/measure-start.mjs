#!/usr/bin/env node
// Measures pod-lifecycle's start (Redis user + create + wait until the agent heart-beats +
// running + dispatch) and destroy with the in-process backend and the real agent, against the
// local Redis, with the built packages (npx tsc -b services/pod-lifecycle agent first).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createKeySpace,
  DispatchKeys,
  JobStore,
  LeaseRenewal,
  parseJobSpec,
  QueueNames,
  SandboxAcl,
  SlotAdmission,
} from '@sandstream/bus';
import { createDestroyProcessor, createStartProcessor } from '@sandstream/pod-lifecycle';
import { InProcessBackend } from '@sandstream/sandbox';
import { silentLogger } from '@sandstream/telemetry';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const N = Number(process.env.STARTS ?? 10);
const ns = `bench-pl-${Math.random().toString(36).slice(2, 8)}`;
const keys = createKeySpace(ns);
const redis = new Redis(url, { maxRetriesPerRequest: null });
const root = mkdtempSync(join(tmpdir(), 'sandstream-bench-'));
const logger = silentLogger('bench');
const backend = new InProcessBackend({ redis, root, registryKey: `${ns}:inprocess` });
const store = new JobStore({ redis, keys });
const leases = new LeaseRenewal({ redis, keys, leaseMs: 60_000 });
const admission = new SlotAdmission({ redis, keys, globalLimit: 100, tenantLimit: 100, leaseMs: 60_000 });
const acl = new SandboxAcl(redis, keys, `bench-${ns}-`);
const dispatchQueue = new Queue(QueueNames.dispatch, { connection: redis, prefix: keys.bullPrefix });
const destroyQueue = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix: keys.bullPrefix });
const deps = { store, leases, redis, keys, backend, acl, logger };
const start = createStartProcessor({
  ...deps,
  dispatchKeys: new DispatchKeys(keys, 4),
  agentRedisUrl: url,
  dispatchQueue,
  destroyQueue,
  installation: `bench-${ns}`,
});
const destroy = createDestroyProcessor({ ...deps, graceMs: 5000 });
const fakeJob = (data) => ({ id: 'bench', data, attemptsMade: 0, opts: { attempts: 1 } });

const starts = [];
const destroys = [];
for (let i = 0; i < N; i++) {
  const jobId = `${ns}-${i}`;
  await store.create(
    parseJobSpec({ id: jobId, tenant: 'acme', image: 'local', steps: [{ command: 'true' }] }),
  );
  await admission.acquire(jobId, 'acme');
  await store.transition(jobId, ['queued'], 'scheduled');
  let t = performance.now();
  const outcome = await start(fakeJob({ jobId, tenant: 'acme', sandbox: { image: 'local' } }));
  starts.push(performance.now() - t);
  if (outcome !== 'dispatched') throw new Error(`start ${i}: ${outcome}`);
  t = performance.now();
  await destroy(fakeJob({ jobId, reason: 'bench', outcome: 'succeeded' }));
  destroys.push(performance.now() - t);
  await store.delete(jobId, 'acme');
}
const med = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)].toFixed(0);
console.log(
  `start (ACL user + spawn agent + heartbeat + running + dispatch): median ${med(starts)} ms; destroy (shutdown step, exit, cleanup): median ${med(destroys)} ms; ${N} sandboxes, in-process backend`,
);
await dispatchQueue.obliterate({ force: true });
await destroyQueue.obliterate({ force: true });
await dispatchQueue.close();
await destroyQueue.close();
const rest = await redis.keys(`*${ns}*`);
if (rest.length) await redis.unlink(...rest);
await backend.close();
redis.disconnect();
rmSync(root, { recursive: true, force: true });
