import { bullJobId, readSandboxUser, SandboxAcl, teardownClaimKey } from '@sandstream/bus';
import {
  type CreateSandboxRequest,
  type InProcessBackend,
  SandboxLabels,
  type SandboxRef,
  SandboxStartError,
} from '@sandstream/sandbox';
import { decodeCompletionNotice, resultKey, SCHEMA_VERSION, StepResultSchema } from '@sandstream/wire';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createDestroyProcessor } from './destroy-sandbox.js';
import { createStartProcessor } from './start-sandbox.js';
import { useStartProcessor } from './testing/start-processor-harness.js';

const harness = useStartProcessor({
  name: 'pl',
  installation: 'lifecycle-test',
  concurrency: 2,
  deps: () => ({ acl }),
  forgetJob: (id) => acl.delete(id),
});
const {
  url,
  suffix,
  keys,
  prefix,
  logger,
  redis,
  backend,
  store,
  leases,
  dispatchKeys,
  admission,
  dispatchQueue,
  destroyQueue,
  scheduledJob,
  runCreate,
} = harness;
// Typed: the harness's deps name it, so it would otherwise be inferred from itself.
const acl: SandboxAcl = new SandboxAcl(redis, keys, `sandstream-test-${suffix}-`);

describe('pod-lifecycle', () => {
  it('starts a sandbox whose agent runs under its own Redis user, dispatches it, then destroys it completely', async () => {
    const jobId = await scheduledJob('ok');
    expect(await runCreate(jobId, { image: 'local', startDeadlineSeconds: 30 })).toBe('dispatched');

    const record = await store.get(jobId);
    expect(record?.state).toBe('running');
    expect(record?.sandbox?.backend).toBe('inprocess');
    const dispatch = await dispatchQueue.getJob(bullJobId(jobId));
    expect(dispatch?.data).toMatchObject({ jobId, notifyStream: dispatchKeys.completionStreamFor(jobId) });
    // The agent authenticated as the sandbox user, not as the service.
    const clients = (await redis.call('CLIENT', 'LIST')) as string;
    expect(clients).toContain(`user=${acl.username(jobId)}`);
    // Labelled with its installation, and its user's hash kept for a restore after a restart.
    const listed = (await backend.list()).find((s) => s.jobId === jobId);
    expect(listed?.labels[SandboxLabels.installation]).toBe('lifecycle-test');
    expect(await readSandboxUser(redis, keys, jobId)).toMatchObject({ username: acl.username(jobId) });

    // The real agent, restricted by the ACL, can still do its whole job: run a step, report, notify.
    const sk = keys.sandbox(jobId);
    await redis.lpush(
      sk.in,
      JSON.stringify({ schemaVersion: SCHEMA_VERSION, stepId: 's1', command: 'echo', args: ['hi'] }),
    );
    // Under the services the result is SET on the step's own key (wire resultKey).
    await expect.poll(() => redis.get(resultKey(sk, 's1')), { timeout: 20_000 }).toBeTruthy();
    expect(
      StepResultSchema.parse(JSON.parse((await redis.get(resultKey(sk, 's1'))) as string)).exitCode,
    ).toBe(0);
    const notices = await redis.xrange(dispatch!.data.notifyStream, '-', '+');
    expect(notices.map(([, f]) => decodeCompletionNotice(f))).toContainEqual({ jobId, stepId: 's1' });

    const destroy = createDestroyProcessor({
      store,
      leases,
      redis,
      keys,
      backend,
      acl,
      graceMs: 5000,
      logger,
    });
    const destroyJob = await destroyQueue.add('destroy', {
      jobId,
      reason: 'job succeeded',
      outcome: 'succeeded',
    });
    expect(await destroy(destroyJob)).toBe('destroyed');
    expect(await destroy(destroyJob)).toBe('destroyed'); // idempotent

    expect((await store.get(jobId))?.state).toBe('succeeded');
    expect(await backend.list()).not.toContainEqual(expect.objectContaining({ jobId }));
    expect(await acl.listJobIds()).not.toContain(jobId);
    expect(await redis.exists(sk.in, sk.control, sk.heartbeat)).toBe(0);
    expect(await redis.exists(sk.events)).toBe(1); // output kept for retention
    // A reaper with a short grace that listed it meanwhile leaves the teardown to this destroy.
    expect(await redis.get(teardownClaimKey(keys, jobId))).toBe('pod-lifecycle');
    expect(await admission.inUse()).toBe(0);
  });

  it('frees the slot as soon as the job has ended, before its sandbox is torn down', async () => {
    const jobId = await scheduledJob('early-release');
    expect(await runCreate(jobId, { image: 'local', startDeadlineSeconds: 30 })).toBe('dispatched');
    // A backend whose destroy waits for the test: while it waits, the sandbox still exists.
    let openGate = () => {};
    const gate = new Promise<void>((resolve) => {
      openGate = resolve;
    });
    let tearingDown = false;
    const slowBackend: InProcessBackend = Object.assign(Object.create(backend) as InProcessBackend, {
      destroy: async (ref: SandboxRef, options?: { graceMs?: number }) => {
        tearingDown = true;
        await gate;
        return backend.destroy(ref, options);
      },
    });
    const destroy = createDestroyProcessor({
      store,
      leases,
      redis,
      keys,
      backend: slowBackend,
      acl,
      graceMs: 5000,
      logger,
    });
    const held = async () => (await admission.holders()).some((h) => h.holder === jobId);
    expect(await held()).toBe(true);
    const done = destroy(
      await destroyQueue.add('destroy', { jobId, reason: 'cancelled', outcome: 'cancelled' }),
    );
    await expect.poll(() => tearingDown, { timeout: 10_000 }).toBe(true);
    expect((await store.get(jobId))?.state).toBe('cancelled');
    expect(await held()).toBe(false);
    openGate();
    expect(await done).toBe('destroyed');
    expect(await backend.list()).not.toContainEqual(expect.objectContaining({ jobId }));
  });

  it('fails the job with the backend reason when the agent cannot start, and queues the cleanup', async () => {
    const jobId = await scheduledJob('crash');
    const outcome = await runCreate(jobId, {
      image: 'local',
      startDeadlineSeconds: 10,
      command: ['/bin/sh', '-c', 'echo agent exploded >&2; exit 3'],
    });
    expect(outcome).toBe('failed');
    const record = await store.get(jobId);
    expect(record?.state).toBe('failed');
    expect(record?.reason).toMatch(/^sandbox did not start \(agent_crashed\): .*agent exploded/s);
    const destroys = await destroyQueue.getJobs(['waiting']);
    expect(destroys.map((j) => j.data)).toContainEqual(expect.objectContaining({ jobId, outcome: 'failed' }));
  });

  it('does not start a sandbox for a job cancelled while it was scheduled', async () => {
    const jobId = await scheduledJob('cancelled');
    await store.requestCancel(jobId, 'user changed their mind');
    expect(await runCreate(jobId, { image: 'local' })).toBe('cancelled');
    expect((await store.get(jobId))?.state).toBe('cancelled');
    expect((await store.get(jobId))?.sandbox).toBeUndefined();
  });

  it('retries a capacity failure with backoff, then starts', async () => {
    // The real backend, behind a cluster that says "quota exceeded" twice first.
    let refusals = 2;
    const quotaBackend = Object.assign(Object.create(backend) as InProcessBackend, {
      create: async (request: CreateSandboxRequest): Promise<SandboxRef> => {
        if (refusals-- > 0) throw new SandboxStartError('quota', 'exceeded quota: pods=10');
        return backend.create(request);
      },
    });
    const start = createStartProcessor({ ...harness.startDeps, backend: quotaBackend });
    const jobId = await scheduledJob('quota');
    const queue = new Queue(`retry-${suffix}`, { connection: redis, prefix });
    const worker = new Worker(`retry-${suffix}`, (job) => start(job), {
      connection: new Redis(url, { maxRetriesPerRequest: null }),
      prefix,
    });
    const retryEvents = new QueueEvents(`retry-${suffix}`, {
      connection: new Redis(url, { maxRetriesPerRequest: null }),
      prefix,
    });
    try {
      await retryEvents.waitUntilReady();
      const job = await queue.add(
        'create',
        { jobId, tenant: 'acme', sandbox: { image: 'local' } },
        { attempts: 5, backoff: { type: 'exponential', delay: 100 } },
      );
      expect(await job.waitUntilFinished(retryEvents, 30_000)).toBe('dispatched');
      // Two refused attempts, then the one that started it (BullMQ counts all three).
      expect((await queue.getJob(job.id!))?.attemptsMade).toBe(3);
      expect((await store.get(jobId))?.state).toBe('running');
    } finally {
      await worker.close();
      await retryEvents.close();
      await queue.obliterate({ force: true });
      await queue.close();
      const destroy = createDestroyProcessor({
        store,
        leases,
        redis,
        keys,
        backend,
        acl,
        graceMs: 2000,
        logger,
      });
      await destroy(await destroyQueue.add('destroy', { jobId, reason: 'test over' }));
    }
  });

  it('re-announces a running sandbox when its create is redelivered after a crash before the dispatch', async () => {
    const jobId = await scheduledJob('redelivered');
    await store.transition(jobId, ['scheduled'], 'starting', {
      sandbox: { backend: 'inprocess', id: '4242' },
    });
    await store.transition(jobId, ['starting'], 'running');
    expect(await runCreate(jobId, { image: 'local' })).toBe('dispatched');
    const dispatch = await dispatchQueue.getJob(bullJobId(jobId));
    expect(dispatch?.data).toMatchObject({ jobId, sandbox: { backend: 'inprocess', id: '4242' } });
  });

  it('frees what an earlier attempt left in Redis when its create comes again mid-start, no sandbox recorded', async () => {
    // Its pod-lifecycle died inside create: the job is starting, its sandbox not recorded yet.
    const jobId = await scheduledJob('resumed');
    await store.transition(jobId, ['scheduled'], 'starting');
    const k = keys.sandbox(jobId);
    const stale = [`${k.prefix}xfer:earlier`, k.control];
    await redis.set(stale[0] as string, 'left by the earlier attempt');
    await redis.lpush(k.control, 'left by the earlier attempt');
    expect(await runCreate(jobId, { image: 'local' })).toBe('dispatched');
    expect(await redis.exists(...stale)).toBe(0);
  });
});
