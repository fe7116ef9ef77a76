import {
  createKeySpace,
  DispatchKeys,
  ExpiredLeases,
  JobField,
  type JobState,
  JobStore,
  type KeySpace,
  type PoolMember,
  parseJobSpec,
  previewLabel,
  registerPreview,
  SandboxAcl,
  sandboxOfLabel,
  TEARDOWN_CLAIM_MS,
  teardownClaimKey,
  WarmPoolStore,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { describe, expect, it } from 'vitest';
import { Reaper } from './reaper.js';

// A private redis-server: the test reads its command counts (INFO commandstats), which the shared
// one would mix with everyone's.
const priv = usePrivateRedis({ maxRetriesPerRequest: null });
const HOUR = 3600_000;
const FINISHED: JobState[] = ['scheduled', 'starting', 'running', 'succeeded'];

/** Calls per command since the last CONFIG RESETSTAT. */
async function commandCalls(): Promise<Record<string, number>> {
  const info = (await priv.redis.info('commandstats')) as string;
  const calls: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]!] = Number(m[2]);
  return calls;
}

function reaperOf(keys: KeySpace, store: JobStore, acl?: SandboxAcl, pools?: WarmPoolStore): Reaper {
  const redis = priv.redis;
  return new Reaper({
    redis,
    ...(acl ? { acl } : {}),
    ...(pools ? { pools } : {}),
    keys,
    store,
    leases: new ExpiredLeases({ redis, keys }),
    dispatchKeys: new DispatchKeys(keys, 2),
    logger: silentLogger('reaper-index-test'),
    retentionMs: HOUR,
    orphanGraceMs: 1000,
    sandboxGraceMs: 0,
    startingTimeoutMs: 10 * 60_000,
    heartbeatGraceMs: 5 * 60_000,
    fullScanEvery: 2,
    scanCount: 50,
    pauseMs: 0,
  });
}

/** A job of `tenant` run to `succeeded`, ended two hours ago (record and index). */
async function finishedLongAgo(keys: KeySpace, store: JobStore, id: string, tenant: string): Promise<void> {
  await store.create(parseJobSpec({ id, tenant, image: 'x', steps: [{ command: 'true' }] }));
  let from: JobState = 'queued';
  for (const to of FINISHED) {
    await store.transition(id, [from], to);
    from = to;
  }
  const at = Date.now() - 2 * HOUR;
  await priv.redis.hset(keys.job(id), JobField.finishedAt, String(at));
  await priv.redis.zadd(keys.jobsByState('succeeded'), at, id);
}

describe('reaper passes between full scans', () => {
  it('read only the jobs that are due, and a full scan still reaps a job missing from the index', async () => {
    const redis = priv.redis;
    const keys = createKeySpace('t-reapidx');
    const store = new JobStore({ redis, keys });
    const finish = async (name: string) => {
      const id = `t-reapidx-${name}`;
      await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
      let from: JobState = 'queued';
      for (const to of FINISHED) {
        await store.transition(id, [from], to);
        from = to;
      }
      return id;
    };
    /** Makes a finished job look as if it ended two hours ago (record and, if indexed, index). */
    const age = async (id: string, indexed: boolean) => {
      const at = Date.now() - 2 * HOUR;
      await redis.hset(keys.job(id), JobField.finishedAt, String(at));
      if (indexed) await redis.zadd(keys.jobsByState('succeeded'), at, id);
      else await redis.zrem(keys.jobsByState('succeeded'), id);
    };
    const retained: string[] = [];
    for (let i = 0; i < 20; i++) retained.push(await finish(`kept${i}`));
    const reaper = new Reaper({
      redis,
      keys,
      store,
      leases: new ExpiredLeases({ redis, keys }),
      dispatchKeys: new DispatchKeys(keys, 2),
      logger: silentLogger('reaper-index-test'),
      retentionMs: HOUR,
      orphanGraceMs: 1000,
      sandboxGraceMs: 0,
      startingTimeoutMs: 10 * 60_000,
      heartbeatGraceMs: 5 * 60_000,
      fullScanEvery: 2,
      scanCount: 50,
      pauseMs: 0,
    });
    // Pass 0 walks everything: 20 jobs within retention, nothing to do.
    expect((await reaper.runOnce()).jobsScanned).toBe(20);

    const due = await finish('due');
    await age(due, true);
    const unindexed = await finish('unindexed');
    await age(unindexed, false);
    await redis.config('RESETSTAT');
    // Pass 1 reads the index: only the due job is looked at and deleted.
    const indexed = await reaper.runOnce();
    const calls = await commandCalls();
    expect(indexed.jobsDeleted).toBe(1);
    expect(indexed.jobsScanned).toBe(1);
    expect(await redis.exists(keys.job(due))).toBe(0);
    expect(await redis.zscore(keys.jobsByState('succeeded'), due)).toBeNull();
    expect(calls.scan ?? 0).toBe(0);
    // One glance (HMGET) and one full read (HGETALL) of the due job; none of the 20 kept ones.
    expect(calls.hmget ?? 0).toBe(1);
    expect(calls.hgetall ?? 0).toBeLessThanOrEqual(1);
    expect(await redis.exists(keys.job(unindexed))).toBe(1);

    // Pass 2 walks everything again and finds the job the index missed.
    const full = await reaper.runOnce();
    expect(full.jobsDeleted).toBe(1);
    expect(await redis.exists(keys.job(unindexed))).toBe(0);
    for (const id of retained) expect(await redis.exists(keys.job(id))).toBe(1);
  });

  it("drop deleted jobs' index entries with one ZREM per index for the batch, preview labels too", async () => {
    const redis = priv.redis;
    const keys = createKeySpace('t-reapdrop');
    const store = new JobStore({ redis, keys });
    const reaper = reaperOf(keys, store);
    await reaper.runOnce(); // pass 0: the full walk, nothing there yet
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const id = `t-reapdrop-${i}`;
      await finishedLongAgo(keys, store, id, i % 2 === 0 ? 'acme' : 'umbrella');
      ids.push(id);
    }
    // A preview URL made in a race with the destroy: its label entry outlived the preview hash.
    await registerPreview(redis, keys, { tenant: 'acme', sandboxId: ids[0]!, port: 8080, public: false });
    await redis.unlink(keys.jobPreview(ids[0]!));
    // An index entry whose record is gone (a delete cut short before its index removals).
    await redis.zadd(keys.jobsByState('running'), 1, 't-reapdrop-gone');
    await redis.zadd(keys.jobsByState('succeeded'), 1, 't-reapdrop-gone');
    await redis.config('RESETSTAT');

    const pass = await reaper.runOnce();
    const calls = await commandCalls();
    expect(pass.jobsDeleted).toBe(12);
    for (const id of ids) expect(await redis.exists(keys.job(id))).toBe(0);
    const states = ['queued', 'scheduled', 'starting', 'running', 'succeeded'] as const;
    for (const state of states) expect(await redis.zcard(keys.jobsByState(state))).toBe(0);
    expect(await redis.zcard(keys.jobsByTenant('acme'))).toBe(0);
    expect(await redis.zcard(keys.jobsByTenant('umbrella'))).toBe(0);
    expect(await sandboxOfLabel(redis, keys, previewLabel('acme', ids[0]!))).toBeNull();
    // Per index, not per job: 9 state indexes and 2 tenants for the batch (12 jobs each sent 11
    // before), plus the gone entry's own drop after its look.
    expect(calls.zrem ?? 0).toBeLessThanOrEqual(2 * 9 + 2);
  });
  it("glance at running jobs' Redis users, sent together, and read the whole record of none of them", async () => {
    const redis = priv.redis;
    const keys = createKeySpace('t-reapacl');
    const store = new JobStore({ redis, keys });
    const acl = new SandboxAcl(redis, keys, 'sandstream-test-reapacl-');
    const running: string[] = [];
    for (let i = 0; i < 10; i++) {
      const id = `t-reapacl-run${i}`;
      await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
      let from: JobState = 'queued';
      for (const to of ['scheduled', 'starting', 'running'] as const) {
        await store.transition(id, [from], to);
        from = to;
      }
      await acl.create(id, keys.completionStream(0));
      running.push(id);
    }
    // A user whose record is gone (its destroy was lost): still taken, after the full look.
    const lost = 't-reapacl-lost';
    await acl.create(lost, keys.completionStream(0));
    // A ready warm pool member's user: no job record, no heartbeat, but its pool record vouches.
    const pools = new WarmPoolStore(redis, keys);
    const member: PoolMember = {
      id: 't-reapacl-pool-1',
      pool: 'node',
      specHash: 'h',
      tenants: null,
      state: 'starting',
      createdAt: Date.now(),
      readyBy: Date.now() + 60_000,
      owner: 'test',
    };
    expect(await pools.reserve(member, { max: 1, capacity: 1 })).toBe('reserved');
    await pools.markReady(member);
    await acl.create(member.id, keys.completionStream(0));
    // A finished job's user whose teardown pod-lifecycle's destroy has claimed: left to it.
    const claimed = 't-reapacl-claimed';
    await store.create(
      parseJobSpec({ id: claimed, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }),
    );
    await store.transition(claimed, ['queued'], 'cancelled', { reason: 'test' });
    await acl.create(claimed, keys.completionStream(0));
    await redis.set(teardownClaimKey(keys, claimed), 'pod-lifecycle', 'PX', TEARDOWN_CLAIM_MS);
    try {
      await redis.config('RESETSTAT');
      const report = await reaperOf(keys, store, acl, pools).runOnce();
      const calls = await commandCalls();
      expect(report.aclUsersDeleted).toBe(1);
      expect((await acl.listJobIds()).sort()).toEqual([...running, member.id, claimed].sort());
      // Only the lost job's record is read whole (empty); one per running user per pass before.
      expect(calls.hgetall ?? 0).toBeLessThanOrEqual(1);
      // Pool membership of all 12 users in one HMGET; the full looks (the lost user, the member)
      // read their pool record by HGET, and the lost user's cleanup its preview label: 15 HGETs
      // a pass before, one more per user.
      expect(calls.hget ?? 0).toBeLessThanOrEqual(3);
    } finally {
      for (const id of [...running, lost, member.id, claimed]) await acl.delete(id);
      await pools.remove(member);
    }
  });
});
