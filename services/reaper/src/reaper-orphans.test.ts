import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createKeySpace,
  DispatchKeys,
  ExpiredLeases,
  enqueueDestroy,
  InstallationIdentity,
  JobStore,
  type PoolMember,
  parseJobSpec,
  QueueNames,
  TEARDOWN_CLAIM_MS,
  teardownClaimKey,
  WarmPoolStore,
} from '@sandstream/bus';
import { InProcessBackend, SandboxLabels, SandboxSpecSchema } from '@sandstream/sandbox';
import { silentLogger } from '@sandstream/telemetry';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { Reaper } from './reaper.js';

// One private redis-server for the file (the first suite flushes it), a sandbox root per suite.
const own = usePrivateRedis({ maxRetriesPerRequest: null });

/** A sandbox root of the suite's own, removed after it. */
function sandboxRoot(prefix: string): string {
  const root = mkdtempSync(join(tmpdir(), prefix));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  return root;
}

/** A `sleep 60` sandbox of this installation for `jobId`, as pod-lifecycle would label it. */
async function sandboxHere(backend: InProcessBackend, identity: InstallationIdentity, jobId: string) {
  const labels = {
    [SandboxLabels.installation]: 'here',
    [SandboxLabels.installationId]: await identity.refresh(),
  };
  await backend.create({
    jobId,
    tenant: 'acme',
    spec: SandboxSpecSchema.parse({ image: 'x', command: ['sleep', '60'], labels }),
    agent: { redisUrl: own.server.url, keyStyle: 'tagged' },
  });
}

/** A job's record, then its sandbox, then the job ended (cancelled): what a teardown follows. */
async function endedJobHere(
  store: JobStore,
  backend: InProcessBackend,
  identity: InstallationIdentity,
  jobId: string,
) {
  await store.create(parseJobSpec({ id: jobId, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
  await sandboxHere(backend, identity, jobId);
  await store.transition(jobId, ['queued'], 'cancelled', { reason: 'test' });
}

type ReaperOptions = ConstructorParameters<typeof Reaper>[0];

/** A reaper of installation `here` with grace 0 for sandboxes and every other bound far away. */
function reaperHere(
  options: Pick<ReaperOptions, 'keys' | 'store' | 'backend' | 'now'> & {
    identity: InstallationIdentity;
    name: string;
  } & Partial<ReaperOptions>,
): Reaper {
  const { identity, name, ...rest } = options;
  return new Reaper({
    redis: own.redis,
    leases: new ExpiredLeases({ redis: own.redis, keys: options.keys }),
    dispatchKeys: new DispatchKeys(options.keys, 1),
    logger: silentLogger(name),
    installation: { names: () => ['here'], identity },
    retentionMs: 600_000,
    orphanGraceMs: 600_000,
    sandboxGraceMs: 0,
    startingTimeoutMs: 600_000,
    heartbeatGraceMs: 600_000,
    ...rest,
  });
}

// Sandboxes whose jobs vanished because Redis came back empty: the private redis-server, flushed.
describe('reaper: orphaned sandboxes after Redis lost its data', () => {
  const root = sandboxRoot('sandstream-orphans-');

  it("destroys only this installation's, after the grace, with their processes and directories", async () => {
    const backend = new InProcessBackend({ redis: own.redis, root });
    const keys = createKeySpace('orphans');
    // The running reaper's view of this Redis's installation id, from before the data loss.
    const identity = new InstallationIdentity(own.redis, keys);
    const id = await identity.refresh();
    const sandbox = (jobId: string, labels: Record<string, string>) =>
      backend.create({
        jobId,
        tenant: 'acme',
        spec: SandboxSpecSchema.parse({ image: 'x', command: ['sleep', '60'], labels }),
        agent: { redisUrl: own.server.url, keyStyle: 'tagged' },
      });
    await sandbox('mine', { [SandboxLabels.installation]: 'here', [SandboxLabels.installationId]: id });
    await sandbox('theirs', { [SandboxLabels.installation]: 'elsewhere' });
    await sandbox('unlabelled', {});
    // Same name, another Redis: its job lives where this reaper cannot look.
    await sandbox('namesake', {
      [SandboxLabels.installation]: 'here',
      [SandboxLabels.installationId]: 'r-000000000000',
    });
    // Same name, made before installation ids: trusted by name only with its record here.
    await sandbox('older', { [SandboxLabels.installation]: 'here' });
    const stateDirOf = async (jobId: string) =>
      JSON.parse((await own.redis.hget('sandstream:inprocess:sandboxes', jobId)) ?? '{}').stateDir as string;
    const mineDir = await stateDirOf('mine');
    expect(existsSync(mineDir)).toBe(true);
    // Redis restarted empty: no job records, no in-process registry.
    await own.redis.flushall();

    let offset = 0;
    const reaper = new Reaper({
      redis: own.redis,
      keys,
      store: new JobStore({ redis: own.redis, keys }),
      leases: new ExpiredLeases({ redis: own.redis, keys }),
      dispatchKeys: new DispatchKeys(keys, 1),
      logger: silentLogger('reaper-orphans'),
      backend,
      installation: { names: () => ['here'], identity },
      retentionMs: 60_000,
      orphanGraceMs: 60_000,
      sandboxGraceMs: 30_000,
      startingTimeoutMs: 60_000,
      heartbeatGraceMs: 60_000,
      now: () => Date.now() + offset,
    });
    try {
      // First sight of a missing job starts its grace: nothing goes yet.
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(0);
      offset += 31_000;
      const report = await reaper.runOnce();
      expect(report.sandboxesDestroyed).toBe(1);
      expect(report.sandboxesForeign).toBe(1);
      // The id came back with the reaper that held it.
      expect(await own.redis.get(keys.installationId)).toBe(id);
      const left = await backend.list();
      expect(left.map((s) => s.jobId).sort()).toEqual(['namesake', 'older', 'theirs', 'unlabelled']);
      expect(left.every((s) => s.state === 'running')).toBe(true);
      expect(existsSync(mineDir)).toBe(false);
    } finally {
      for (const jobId of ['mine', 'theirs', 'unlabelled', 'namesake', 'older'])
        await backend.destroy({ jobId, backend: 'inprocess', id: '0' }, { graceMs: 0 });
    }
    expect(await backend.list()).toEqual([]);
  });
});

// Warm pool members have no job record of their own: their pool record vouches for them.
describe('reaper: warm pool members', () => {
  const root = sandboxRoot('sandstream-pool-orphans-');

  it('keeps recorded idle members and claimed ones while their job lives; destroys those left unrecorded', async () => {
    const backend = new InProcessBackend({ redis: own.redis, root });
    const keys = createKeySpace('pool-orphans');
    const pools = new WarmPoolStore(own.redis, keys);
    const store = new JobStore({ redis: own.redis, keys });
    const identity = new InstallationIdentity(own.redis, keys);
    const labels = {
      [SandboxLabels.installation]: 'here',
      [SandboxLabels.installationId]: await identity.refresh(),
      [SandboxLabels.warmPool]: 'node',
    };
    const make = (jobId: string) =>
      backend.create({
        jobId,
        tenant: 'pool:node',
        spec: SandboxSpecSchema.parse({ image: 'x', command: ['sleep', '60'], labels }),
        agent: { redisUrl: own.server.url, keyStyle: 'tagged' },
      });
    const record = (id: string): PoolMember => ({
      id,
      pool: 'node',
      specHash: 'h',
      tenants: null,
      state: 'starting',
      createdAt: Date.now(),
      readyBy: Date.now() + 60_000,
      owner: 'test',
    });
    // Ready in this order: the claim below takes the longest-ready member, `claimed`.
    for (const id of ['claimed', 'idle', 'left']) {
      await make(id);
      expect(await pools.reserve(record(id), { max: 10, capacity: 10 })).toBe('reserved');
      await pools.markReady(record(id));
      // Time itself orders them: each member's ready time must be later than the one before.
      await new Promise((r) => setTimeout(r, 5));
    }
    await store.create(
      parseJobSpec({ id: 'job-1', tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }),
    );
    expect(await pools.claim({ pool: 'node', specHash: 'h', jobId: 'job-1', tenant: 'acme' })).toMatchObject({
      kind: 'hit',
      member: { id: 'claimed' },
    });
    // `left`: a pod-lifecycle died between making the sandbox and a retire finishing.
    const left = await pools.get('left');
    await pools.remove(left as PoolMember);

    let offset = 0;
    const reaper = new Reaper({
      redis: own.redis,
      keys,
      store,
      leases: new ExpiredLeases({ redis: own.redis, keys }),
      dispatchKeys: new DispatchKeys(keys, 1),
      logger: silentLogger('reaper-pools'),
      backend,
      pools,
      installation: { names: () => ['here'], identity },
      retentionMs: 600_000,
      orphanGraceMs: 600_000,
      sandboxGraceMs: 30_000,
      startingTimeoutMs: 600_000,
      heartbeatGraceMs: 600_000,
      now: () => Date.now() + offset,
    });
    const alive = async () => (await backend.list()).map((s) => s.jobId).sort();
    try {
      await reaper.runOnce();
      offset += 31_000;
      await reaper.runOnce();
      expect(await alive()).toEqual(['claimed', 'idle']);
      // The job that claimed a member ends: past the grace, its member goes too, record and all.
      await store.transition('job-1', ['queued'], 'cancelled', { reason: 'test' });
      offset += 31_000;
      await reaper.runOnce();
      expect(await alive()).toEqual(['idle']);
      expect(await pools.get('claimed')).toBeNull();
      expect(await pools.get('idle')).not.toBeNull();
    } finally {
      for (const jobId of ['idle', 'claimed', 'left'])
        await backend.destroy({ jobId, backend: 'inprocess', id: '0' }, { graceMs: 0 });
    }
  });
});

// With a short sandbox grace the reaper sees a finished job's sandbox while pod-lifecycle's destroy
// is tearing it down: the claim that destroy sets keeps the reaper from doing it all again.
describe('reaper: a sandbox whose teardown is claimed', () => {
  const root = sandboxRoot('sandstream-claimed-');

  it('is left to the claimant; once the claim lapses, an orphan is destroyed', async () => {
    let probes = 0;
    const backend = new InProcessBackend({
      redis: own.redis,
      root,
      // kill(0) alone: the test's agents live for its length, so their pids are not reused.
      liveness: async (pid) => {
        probes++;
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      },
    });
    const keys = createKeySpace('claimed-teardown');
    const store = new JobStore({ redis: own.redis, keys });
    const identity = new InstallationIdentity(own.redis, keys);
    await endedJobHere(store, backend, identity, 'done-1');
    const claim = teardownClaimKey(keys, 'done-1');
    await own.redis.set(claim, 'pod-lifecycle', 'PX', TEARDOWN_CLAIM_MS);
    let offset = 1000;
    const reaper = reaperHere({
      keys,
      store,
      backend,
      identity,
      name: 'reaper-claimed',
      now: () => Date.now() + offset,
    });
    try {
      probes = 0;
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(0);
      // The pass judged the sandbox by its job's record: its agent's liveness was never read.
      expect(probes).toBe(0);
      expect((await backend.list()).map((s) => s.jobId)).toEqual(['done-1']);
      // The claimant died mid-teardown: its claim lapses and the reaper finishes the work.
      await own.redis.del(claim);
      offset += 1000;
      await own.redis.config('RESETSTAT');
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(1);
      // Judged by a glance at its record (this namespace's, ended past the grace): not read whole.
      // The one HGETALL is the in-process backend's registry, listed once a pass.
      const stats = (await own.redis.info('commandstats')) as string;
      expect(/^cmdstat_hgetall:calls=(\d+)/m.exec(stats)?.[1] ?? '0').toBe('1');
      expect(await backend.list()).toEqual([]);
      // The reaper's own claim stays until it expires: a later pass that listed it leaves it.
      expect(await own.redis.get(claim)).toBe('reaper');
    } finally {
      await backend.destroy({ jobId: 'done-1', backend: 'inprocess', id: '0' }, { graceMs: 0 });
    }
  });
});

// With a short sandbox grace the reaper's pass may come between a job's end and pod-lifecycle's
// taking its destroy: a destroy still queued keeps the reaper off, for as long as a claim would.
describe('reaper: a sandbox whose destroy is queued', () => {
  const root = sandboxRoot('sandstream-queued-');

  it('is left to pod-lifecycle; past the time a claim holds, the reaper tears it down', async () => {
    const backend = new InProcessBackend({ redis: own.redis, root });
    const keys = createKeySpace('queued-teardown');
    const store = new JobStore({ redis: own.redis, keys });
    const identity = new InstallationIdentity(own.redis, keys);
    const destroyQueue = new Queue(QueueNames.sandboxDestroy, {
      connection: own.redis,
      prefix: keys.bullPrefix,
    });
    await endedJobHere(store, backend, identity, 'done-2');
    // What the dispatcher does at a job's end; no pod-lifecycle here takes it.
    await enqueueDestroy(destroyQueue, { jobId: 'done-2', reason: 'test', outcome: 'cancelled' });
    let offset = 1000;
    const reaper = reaperHere({
      keys,
      store,
      backend,
      identity,
      name: 'reaper-queued',
      destroyQueue,
      now: () => Date.now() + offset,
    });
    try {
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(0);
      expect((await backend.list()).map((s) => s.jobId)).toEqual(['done-2']);
      // pod-lifecycle never took it: once a claim would have lapsed, the reaper tears down.
      offset += TEARDOWN_CLAIM_MS;
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(1);
      expect(await backend.list()).toEqual([]);
    } finally {
      await backend.destroy({ jobId: 'done-2', backend: 'inprocess', id: '0' }, { graceMs: 0 });
      await destroyQueue.obliterate({ force: true });
      await destroyQueue.close();
    }
  });
  it('is left while the step-dispatcher finalizes (dispatch state without its TTL), then torn down', async () => {
    const backend = new InProcessBackend({ redis: own.redis, root });
    const keys = createKeySpace('finalizing-teardown');
    const store = new JobStore({ redis: own.redis, keys });
    const identity = new InstallationIdentity(own.redis, keys);
    const dispatchKeys = new DispatchKeys(keys, 1);
    // The dispatcher between the job's terminal transition and its destroy's enqueue.
    await own.redis.hset(dispatchKeys.dispatchState('done-3'), 'status', 'finished');
    await endedJobHere(store, backend, identity, 'done-3');
    const reaper = reaperHere({
      keys,
      store,
      backend,
      identity,
      name: 'reaper-finalizing',
      dispatchKeys,
      now: () => Date.now() + 1000,
    });
    try {
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(0);
      expect((await backend.list()).map((s) => s.jobId)).toEqual(['done-3']);
      // Finalized (the TTL comes after the enqueue) and no destroy to be seen: an orphan now.
      await own.redis.pexpire(dispatchKeys.dispatchState('done-3'), 60_000);
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(1);
      expect(await backend.list()).toEqual([]);
    } finally {
      await backend.destroy({ jobId: 'done-3', backend: 'inprocess', id: '0' }, { graceMs: 0 });
    }
  });
  it('of a job whose record is already gone is left to its queued destroy for the same time', async () => {
    const backend = new InProcessBackend({ redis: own.redis, root });
    const keys = createKeySpace('vanished-queued');
    const store = new JobStore({ redis: own.redis, keys });
    const identity = new InstallationIdentity(own.redis, keys);
    const destroyQueue = new Queue(QueueNames.sandboxDestroy, {
      connection: own.redis,
      prefix: keys.bullPrefix,
    });
    // Its record deleted at once (retention 0) while its destroy waits for pod-lifecycle.
    await sandboxHere(backend, identity, 'gone-4');
    await enqueueDestroy(destroyQueue, { jobId: 'gone-4', reason: 'test', outcome: 'succeeded' });
    let offset = 0;
    const reaper = reaperHere({
      keys,
      store,
      backend,
      identity,
      name: 'reaper-vanished-queued',
      destroyQueue,
      retentionMs: 0,
      now: () => Date.now() + offset,
    });
    try {
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(0);
      expect((await backend.list()).map((s) => s.jobId)).toEqual(['gone-4']);
      offset += TEARDOWN_CLAIM_MS + 1000;
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(1);
      expect(await backend.list()).toEqual([]);
    } finally {
      await backend.destroy({ jobId: 'gone-4', backend: 'inprocess', id: '0' }, { graceMs: 0 });
      await destroyQueue.obliterate({ force: true });
      await destroyQueue.close();
    }
  });
});
