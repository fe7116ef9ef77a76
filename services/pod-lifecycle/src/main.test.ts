import { fileURLToPath } from 'node:url';
import {
  bullJobId,
  createKeySpace,
  JobStore,
  parseJobSpec,
  QueueNames,
  SandboxAcl,
  SlotAdmission,
} from '@sandstream/bus';
import { InProcessBackend } from '@sandstream/sandbox';
import { deleteNamespaceKeys, ServiceProcess, testRedisUrl } from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';

// The built service, as production runs it (npx tsc -b services/pod-lifecycle).
const entry = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const url = testRedisUrl();
const ns = `t-plmain-${Math.random().toString(36).slice(2, 10)}`;
const keys = createKeySpace(ns);
const redis = new Redis(url, { maxRetriesPerRequest: null });
const store = new JobStore({ redis, keys });
const procs: ServiceProcess[] = [];

afterAll(async () => {
  for (const p of procs) await p.stop();
  // The service used the default in-process registry (shared): destroy only this test's sandbox.
  const backend = new InProcessBackend({ redis });
  await backend.destroy({ jobId: `${ns}-job`, backend: 'inprocess', id: '0' }, { graceMs: 0 });
  await new SandboxAcl(redis, keys).delete(`${ns}-job`);
  const q = new Queue(QueueNames.dispatch, { connection: redis, prefix: keys.bullPrefix });
  await q.obliterate({ force: true });
  await q.close();
  await store.delete(`${ns}-job`, 'acme');
  await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

function start(env: Record<string, string> = {}) {
  const p = new ServiceProcess(entry, {
    REDIS_URL: url,
    SANDSTREAM_NAMESPACE: ns,
    SANDBOX_TYPE: 'inprocess',
    HEALTH_PORT: '0',
    LOG_LEVEL: 'info',
    ...env,
  });
  procs.push(p);
  return p;
}

describe('pod-lifecycle process', () => {
  it('refuses bad configuration naming the variable and the rule', async () => {
    const p = start({ DESTROY_GRACE_SECONDS: '9999', SANDBOX_ACL: 'maybe' });
    expect(await p.exitCode()).toBe(1);
    const fatal = await p.waitForLog((l) => l.level === 'fatal');
    expect(fatal.err).toContain('DESTROY_GRACE_SECONDS: must be at most 600');
    expect(fatal.err).toContain('SANDBOX_ACL: SANDBOX_ACL must be auto, on or off');
  });

  it('reports ready, finishes the start in flight on SIGTERM, then exits 0', async () => {
    const p = start();
    const started = await p.waitForLog((l) => l.msg === 'pod-lifecycle started');
    const health = `http://127.0.0.1:${started.healthPort}`;
    expect((await fetch(`${health}/readyz`)).status).toBe(200);

    const jobId = `${ns}-job`;
    await store.create(
      parseJobSpec({ id: jobId, tenant: 'acme', image: 'local', steps: [{ command: 'true' }] }),
    );
    await new SlotAdmission({ redis, keys, globalLimit: 5, tenantLimit: 5, leaseMs: 60_000 }).acquire(
      jobId,
      'acme',
    );
    await store.transition(jobId, ['queued'], 'scheduled');
    const createQueue = new Queue(QueueNames.sandboxCreate, { connection: redis, prefix: keys.bullPrefix });
    await createQueue.add(
      'create',
      { jobId, tenant: 'acme', sandbox: { image: 'local' } },
      { jobId: bullJobId(jobId) },
    );
    await createQueue.close();

    // SIGTERM while the sandbox is starting: the start must complete, not be lost.
    await vi.waitUntil(async () => (await store.get(jobId))?.state === 'starting', {
      timeout: 20_000,
      interval: 5,
    });
    p.signal('SIGTERM');
    expect(await p.exitCode()).toBe(0);
    expect((await store.get(jobId))?.state).toBe('running');
    const dispatch = new Queue(QueueNames.dispatch, { connection: redis, prefix: keys.bullPrefix });
    expect(await dispatch.getJob(bullJobId(jobId))).toBeTruthy();
    await dispatch.close();
    expect(p.lines.map((l) => l.msg)).toContain('shutdown signal received');
  });
});
