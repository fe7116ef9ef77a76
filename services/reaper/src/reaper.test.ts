import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createKeySpace,
  DispatcherPresence,
  DispatchKeys,
  ExpiredLeases,
  InstallationIdentity,
  type JobState,
  JobStore,
  jobFootprint,
  parseJobSpec,
  QueueNames,
  SandboxAcl,
  SlotAdmission,
} from '@sandstream/bus';
import { InProcessBackend, SandboxLabels } from '@sandstream/sandbox';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { DELETE_FINISHED_JOB } from './reap-scripts.js';
import { matchesGlob, Reaper, type ReaperOptions } from './reaper.js';

const url = testRedisUrl();
const logger = silentLogger('reaper-test');
const redis = new Redis(url, { maxRetriesPerRequest: null });
const cleanups: (() => Promise<void>)[] = [];
const HOUR = 3600_000;

afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  redis.disconnect();
});

function setup(overrides: Partial<ReaperOptions> = {}) {
  const ns = `t-reap-${Math.random().toString(36).slice(2, 10)}`;
  const keys = createKeySpace(ns);
  const store = new JobStore({ redis, keys });
  const leases = new ExpiredLeases({ redis, keys });
  const dispatchKeys = new DispatchKeys(keys, 2);
  const destroyQueue = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix: keys.bullPrefix });
  let offset = 0;
  const options: ReaperOptions = {
    redis,
    keys,
    store,
    leases,
    dispatchKeys,
    logger,
    destroyQueue,
    retentionMs: HOUR,
    orphanGraceMs: 1000,
    sandboxGraceMs: 0,
    startingTimeoutMs: 10 * 60_000,
    heartbeatGraceMs: 5 * 60_000,
    jobIdGlob: `${ns}-*`,
    scanCount: 50,
    pauseMs: 0,
    now: () => Date.now() + offset,
    ...overrides,
  };
  const ids: string[] = [];
  cleanups.push(async () => {
    await destroyQueue.obliterate({ force: true });
    await destroyQueue.close();
    for (const id of ids) await store.delete(id, 'acme');
    await deleteNamespaceKeys(redis, ns);
  });
  const job = async (name: string, path: JobState[] = []) => {
    const id = `${ns}-${name}`;
    ids.push(id);
    await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    let from: JobState = 'queued';
    for (const to of path) {
      await store.transition(id, [from], to);
      from = to;
    }
    // Some output, as an agent would leave it.
    const sk = keys.sandbox(id);
    await redis.xadd(sk.events, '*', 'event', '{}');
    await redis.lpush(sk.results, '{}');
    return id;
  };
  return {
    ns,
    keys,
    store,
    leases,
    dispatchKeys,
    destroyQueue,
    options,
    job,
    advance: (ms: number) => {
      offset += ms;
    },
    reaper: (extra: Partial<ReaperOptions> = {}) => new Reaper({ ...options, ...extra }),
  };
}

const FINISHED: JobState[] = ['scheduled', 'starting', 'running', 'succeeded'];

describe('reaper', () => {
  it('removes finished jobs past retention with all their keys, and never touches a live job', async () => {
    const h = setup();
    const old = await h.job('old', FINISHED);
    await redis.hset(h.dispatchKeys.dispatchState(old), 'status', 'done');
    // Every key its footprint names, as a job may leave them (a claim list, a heartbeat, …).
    const footprint = jobFootprint(h.keys, h.dispatchKeys, old).keys;
    for (const key of footprint) if (!(await redis.exists(key))) await redis.set(key, 'left');
    const queued = await h.job('queued');
    const running = await h.job('running', ['scheduled', 'starting', 'running']);
    await redis.set(h.keys.sandbox(running).heartbeat, '1', 'PX', 60_000);
    await redis.lpush(h.keys.sandbox(running).in, '{"stepId":"x","command":"true"}');
    h.advance(2 * HOUR);

    const report = await h.reaper().runOnce();
    expect(report.jobsDeleted).toBe(1);
    for (const key of [...footprint, ...Object.values(h.keys.sandbox(old)).filter((k) => !k.endsWith(':'))]) {
      expect(await redis.exists(key), key).toBe(0);
    }
    expect(await h.store.list({ tenant: 'acme', limit: 1000 })).not.toContainEqual(
      expect.objectContaining({ id: old }),
    );
    expect((await h.store.get(queued))?.state).toBe('queued');
    expect((await h.store.get(running))?.state).toBe('running');
    expect(await redis.llen(h.keys.sandbox(running).in)).toBe(1);
    expect(await redis.exists(h.keys.sandbox(running).events)).toBe(1);
  });

  it('keeps a finished job within retention', async () => {
    const h = setup();
    const done = await h.job('done', FINISHED);
    const report = await h.reaper().runOnce();
    expect(report.jobsDeleted).toBe(0);
    expect((await h.store.get(done))?.state).toBe('succeeded');
    expect(await redis.exists(h.keys.sandbox(done).events)).toBe(1);
  });

  it('deletes keys of vanished jobs only when idle and without a heartbeat', async () => {
    const h = setup();
    const ghost = `${h.ns}-ghost`;
    const sk = h.keys.sandbox(ghost);
    await redis.lpush(sk.results, '{}');
    await redis.xadd(sk.events, '*', 'event', '{}');
    await redis.hset(h.dispatchKeys.dispatchState(ghost), 'status', 'running');
    const handRun = `${h.ns}-by-hand`; // an agent driven without a job record, still heart-beating
    await redis.lpush(h.keys.sandbox(handRun).results, '{}');
    await redis.set(h.keys.sandbox(handRun).heartbeat, '1', 'PX', 60_000);

    // Too fresh: nothing goes (a grace far longer than the test can take, so load cannot flake it).
    expect((await h.reaper({ orphanGraceMs: 60_000 }).runOnce()).orphanKeysDeleted).toBe(0);
    // OBJECT IDLETIME counts whole seconds: wait until Redis itself counts them past a 2 s grace
    // (reading IDLETIME does not touch the key).
    await expect
      .poll(async () => Number(await redis.object('IDLETIME', sk.results)), {
        timeout: 20_000,
        interval: 250,
      })
      .toBeGreaterThanOrEqual(3);
    const report = await h.reaper({ orphanGraceMs: 2000, scanCount: 1000 }).runOnce();
    expect(report.orphanKeysDeleted).toBe(3);
    expect(await redis.exists(sk.results, sk.events, h.dispatchKeys.dispatchState(ghost))).toBe(0);
    expect(await redis.exists(h.keys.sandbox(handRun).results)).toBe(1);
    // A key written just now is not idle, whatever else is old.
    const busy = `${h.ns}-busy`;
    await redis.lpush(h.keys.sandbox(busy).in, '{}');
    expect(
      (await h.reaper({ orphanGraceMs: 2000, jobIdGlob: busy, scanCount: 1000 }).runOnce()).orphanKeysDeleted,
    ).toBe(0);
    expect(await redis.exists(h.keys.sandbox(busy).in)).toBe(1);
  });

  it('fails jobs stuck in starting; a running job whose agent is gone only while no dispatcher is alive, dispatch state or not', async () => {
    const h = setup();
    const presence = new DispatcherPresence(redis, h.dispatchKeys);
    const dispatchers = { presence, absentMs: 60_000 };
    const starting = await h.job('starting', ['scheduled', 'starting']);
    const orphanRun = await h.job('orphan-run', ['scheduled', 'starting', 'running']);
    const claimed = await h.job('claimed', ['scheduled', 'starting', 'running']);
    await redis.hset(h.dispatchKeys.dispatchState(claimed), 'status', 'running');
    const beating = await h.job('beating', ['scheduled', 'starting', 'running']);
    await redis.set(h.keys.sandbox(beating).heartbeat, '1', 'PX', 60_000);

    expect((await h.reaper({ dispatchers }).runOnce()).jobsFailed).toBe(0); // nothing is old enough yet
    h.advance(20 * 60_000);
    // A dispatcher is alive: agent loss is its business, the reaper leaves running jobs alone.
    await presence.stamp('dispatcher-1', Date.now() + 20 * 60_000);
    expect((await h.reaper({ dispatchers }).runOnce()).jobsFailed).toBe(1);
    expect((await h.store.get(starting))?.state).toBe('failed');
    expect((await h.store.get(orphanRun))?.state).toBe('running');
    expect((await h.store.get(claimed))?.state).toBe('running');
    // No dispatcher for longer than absentMs: the reaper rescues them, dispatch state or not.
    h.advance(2 * 60_000);
    const report = await h.reaper({ dispatchers }).runOnce();
    expect(report.jobsFailed).toBe(2);
    expect(await h.store.get(starting)).toMatchObject({
      state: 'failed',
      reason: expect.stringContaining('stuck in starting'),
    });
    for (const id of [orphanRun, claimed]) {
      expect(await h.store.get(id)).toMatchObject({
        state: 'failed',
        reason: expect.stringContaining('no step-dispatcher has been alive'),
      });
    }
    expect((await h.store.get(beating))?.state).toBe('running');
    const destroys = (await h.destroyQueue.getJobs(['waiting'])).map((j) => j.data.jobId);
    expect(destroys.sort()).toEqual([claimed, orphanRun, starting].sort());
  });

  it('is safe with several reapers at once: each finished job is deleted exactly once, live ones stay', async () => {
    const h = setup();
    const finished = await Promise.all(Array.from({ length: 40 }, (_, i) => h.job(`f${i}`, FINISHED)));
    const live = await Promise.all(Array.from({ length: 10 }, (_, i) => h.job(`l${i}`, ['scheduled'])));
    h.advance(2 * HOUR);
    const others = [new Redis(url), new Redis(url), new Redis(url)];
    try {
      const reports = await Promise.all(
        others.map((client) => h.reaper({ redis: client, scanCount: 10 }).runOnce()),
      );
      expect(reports.reduce((n, r) => n + r.jobsDeleted, 0)).toBe(40);
      for (const id of finished) expect(await redis.exists(h.keys.job(id))).toBe(0);
      for (const id of live) expect((await h.store.get(id))?.state).toBe('scheduled');
    } finally {
      for (const c of others) c.disconnect();
    }
  });

  it('keeps a finished job whose log is not archived yet, until the hold runs out', async () => {
    for (const required of [false, true]) {
      const h = setup();
      const pending = await h.job('pending', FINISHED);
      await redis.set(h.keys.jobLogArchive(pending), 'pending');
      const done = await h.job('done', FINISHED);
      await redis.set(h.keys.jobLogArchive(done), 'done');
      const unseen = await h.job('unseen', FINISHED);
      h.advance(2 * HOUR);
      const reaper = h.reaper({ logArchive: { required, holdMs: 10 * HOUR } });

      const report = await reaper.runOnce();
      // `pending` always holds; no marker at all holds only where the archive is required.
      const held = required ? [pending, unseen] : [pending];
      expect(report.jobsHeldForArchive).toBe(held.length);
      expect(report.jobsDeleted).toBe(3 - held.length);
      for (const id of [pending, done, unseen]) {
        expect(await redis.exists(h.keys.job(id), h.keys.sandbox(id).events)).toBe(held.includes(id) ? 2 : 0);
      }
      // The marker goes with the job's other keys.
      expect(await redis.exists(h.keys.jobLogArchive(done))).toBe(0);

      // An archive down for longer than the hold does not keep Redis growing forever.
      h.advance(10 * HOUR);
      expect((await reaper.runOnce()).jobsDeleted).toBe(held.length);
      for (const id of held) expect(await redis.exists(h.keys.job(id), h.keys.jobLogArchive(id))).toBe(0);
    }
  });

  it('never deletes a job that was re-submitted after the reaper read the old one', async () => {
    const h = setup();
    const id = await h.job('again');
    // The old, finished record is gone and the id now names a new, queued job: the script re-checks.
    const { keys } = jobFootprint(h.keys, h.dispatchKeys, id);
    expect(await DELETE_FINISHED_JOB.run(redis, keys, [Date.now() + HOUR, 0, '0'])).toBeNull();
    expect(await redis.exists(h.keys.job(id))).toBe(1);
  });

  it('reclaims expired leases', async () => {
    let clock = Date.now();
    const h = setup();
    const clockNow = { now: () => clock };
    // The scheduler's side takes the slot; the reaper's reclaims it.
    const admission = new SlotAdmission({
      redis,
      keys: h.keys,
      globalLimit: 5,
      tenantLimit: 5,
      leaseMs: 1000,
      ...clockNow,
    });
    await admission.acquire(`${h.ns}-dead`, 'acme');
    clock += 5000;
    const report = await h
      .reaper({ leases: new ExpiredLeases({ redis, keys: h.keys, ...clockNow }) })
      .runOnce();
    expect(report.leasesReclaimed).toBe(1);
    expect(await redis.zcard(h.keys.leasesGlobal)).toBe(0);
  });

  it('destroys sandboxes and removes Redis users whose job is gone or finished, keeping live ones', async () => {
    const h = setup();
    const root = mkdtempSync(join(tmpdir(), 'sandstream-reaper-'));
    const backend = new InProcessBackend({ redis, root, registryKey: `${h.ns}:inprocess` });
    const acl = new SandboxAcl(redis, h.keys, `sandstream-test-${h.ns}-`);
    const live = await h.job('live-sbx', ['scheduled', 'starting', 'running']);
    await redis.set(h.keys.sandbox(live).heartbeat, '1', 'PX', 60_000);
    const gone = `${h.ns}-gone-sbx`;
    const done = await h.job('done-sbx', FINISHED);
    const identity = new InstallationIdentity(redis, h.keys);
    const labels = {
      [SandboxLabels.installation]: 'here',
      [SandboxLabels.installationId]: await identity.refresh(),
    };
    const spec = { image: 'x', command: ['sleep', '30'], labels };
    const agent = { redisUrl: url, keyStyle: 'tagged' as const };
    for (const jobId of [live, gone, done]) {
      await backend.create({ jobId, tenant: 'acme', spec: spec as never, agent });
      await acl.create(jobId, h.keys.completionStream(0));
    }
    // A user whose sandbox and record are both gone (its destroy was lost).
    const userOnly = `${h.ns}-user-only`;
    await acl.create(userOnly, h.keys.completionStream(0));
    try {
      const installation = { names: () => ['here'], identity };
      const report = await h.reaper({ backend, acl, sandboxGraceMs: 0, installation }).runOnce();
      expect(report.sandboxesDestroyed).toBe(2);
      // The destroyed sandboxes' users went with them (tearDownSandbox); the user pass took the other.
      expect(report.aclUsersDeleted).toBe(1);
      expect((await backend.list()).map((s) => s.jobId)).toEqual([live]);
      expect(await acl.listJobIds()).toEqual([live]);
    } finally {
      for (const jobId of [live, gone, done]) {
        await backend
          .destroy({ jobId, backend: 'inprocess', id: '0' }, { graceMs: 0 })
          .catch(() => undefined);
        await acl.delete(jobId);
      }
      await acl.delete(userOnly);
      await backend.close();
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('matches job-id globs', () => {
    expect(matchesGlob('t-1-abc', 't-1-*')).toBe(true);
    expect(matchesGlob('t-2-abc', 't-1-*')).toBe(false);
    expect(matchesGlob('a.b', 'a.b')).toBe(true);
    expect(matchesGlob('axb', 'a.b')).toBe(false);
  });
});
