import { fileURLToPath } from 'node:url';
import {
  createKeySpace,
  JobField,
  type JobState,
  JobStore,
  type KeySpace,
  parseJobSpec,
  parseLiveSandboxSpec,
  SandboxAcl,
  WarmPoolStore,
} from '@sandstream/bus';
import { pollUntil, ServiceProcess } from '@sandstream/test-support';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { afterAll, describe, expect, it } from 'vitest';

// The built service, as production runs it (npx tsc -b services/reaper).
const entry = fileURLToPath(new URL('../dist/main.js', import.meta.url));
// One redis-server of this file: two namespaces share it, as two installations may.
const own = usePrivateRedis({ maxRetriesPerRequest: null });
const procs: ServiceProcess[] = [];

afterAll(async () => {
  for (const p of procs) await p.stop();
});

const MINUTE = 60_000;

/** Jobs and live sandboxes of one namespace, in the states a reaper acts on. */
async function populate(keys: KeySpace) {
  const redis = own.redis;
  const store = new JobStore({ redis, keys });
  const ns = keys.namespace;
  const job = async (name: string, path: JobState[], live = false) => {
    const id = `${ns}-${name}`;
    const spec = live
      ? parseLiveSandboxSpec({ id, tenant: 'acme', image: 'x' })
      : parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] });
    await store.create(spec);
    let from: JobState = 'queued';
    for (const to of path) {
      await store.transition(id, [from], to);
      from = to;
    }
    // Output, as an agent leaves it.
    await redis.xadd(keys.sandbox(id).events, '*', 'event', '{}');
    await redis.lpush(keys.sandbox(id).results, '{}');
    return id;
  };
  /** The record as a minute-old one reads (the reaper's stuck-job checks look at updatedAt). */
  const age = (id: string, ms: number, field: string = JobField.updatedAt) =>
    redis.hset(keys.job(id), field, String(Date.now() - ms));

  const finished = await job('finished', ['cancelled']);
  // Finished two days ago: past the default retention of a day too.
  const ancient = await job('ancient', ['cancelled']);
  await age(ancient, 2 * 24 * 60 * MINUTE, JobField.finishedAt);
  // Written before records carried their namespace: only the namespace's index says whose it is.
  const legacy = await job('legacy', ['cancelled']);
  await redis.hdel(keys.job(legacy), JobField.namespace);
  const starting = await job('starting', ['scheduled', 'starting']);
  await age(starting, MINUTE);
  // A live sandbox whose agent stopped heart-beating, with no dispatcher anywhere.
  const running = await job('live', ['scheduled', 'starting', 'running'], true);
  await age(running, MINUTE);
  // Its Redis users: one of the finished job, one of a warm pool member (no job record; its
  // agent heart-beats while it waits for a claim).
  const acl = new SandboxAcl(redis, keys);
  await acl.create(finished, keys.completionStream(0));
  const member = `${ns}-pool-member`;
  const pools = new WarmPoolStore(redis, keys);
  const record = {
    id: member,
    pool: 'node',
    specHash: 'h',
    tenants: null,
    state: 'starting' as const,
    createdAt: Date.now(),
    readyBy: Date.now() + MINUTE,
    owner: 'test',
  };
  expect(await pools.reserve(record, { max: 1, capacity: 1 })).toBe('reserved');
  await pools.markReady(record);
  await acl.createPoolMember(member);
  await redis.set(keys.sandbox(member).heartbeat, '1', 'PX', 10 * MINUTE);
  // A member still starting: its user exists, its agent has not heart-beaten yet.
  const booting = `${ns}-pool-booting`;
  expect(await pools.reserve({ ...record, id: booting }, { max: 2, capacity: 2 })).toBe('reserved');
  await acl.createPoolMember(booting);
  // The user of a job whose record is gone (Redis lost it): an orphan, of this namespace only.
  const vanished = `${ns}-vanished`;
  await acl.create(vanished, keys.completionStream(1));
  return { store, acl, finished, ancient, legacy, starting, running, member, booting, vanished };
}

function reaper(ns: string, env: Record<string, string>): ServiceProcess {
  const p = new ServiceProcess(entry, {
    REDIS_URL: own.server.url,
    SANDSTREAM_NAMESPACE: ns,
    HEALTH_PORT: '0',
    REAPER_SANDBOXES: 'off',
    SANDBOX_ACL: 'on',
    REAPER_INTERVAL_SECONDS: '1',
    REAPER_PAUSE_MS: '0',
    ...env,
  });
  procs.push(p);
  return p;
}

/** Resolves after `n` more passes than the process has logged so far. */
async function passes(p: ServiceProcess, n: number): Promise<void> {
  const done = () => p.lines.filter((l) => l.msg === 'reaper pass done').length;
  const target = done() + n;
  await p.waitForLog(() => done() >= target, 60_000);
}

/** A figure of the reaper's pass reports, summed over its passes. */
function total(p: ServiceProcess, field: 'jobsDeleted' | 'jobsFailed'): number {
  return p.lines
    .filter((l) => l.msg === 'reaper pass done')
    .reduce((sum, l) => sum + Number(l[field] ?? 0), 0);
}

describe('reapers of two namespaces on one Redis', () => {
  it('each deletes and fails only its own jobs and users, however aggressive the other', async () => {
    const alphaKeys = createKeySpace('alpha');
    const betaKeys = createKeySpace('beta');
    const alpha = await populate(alphaKeys);
    const beta = await populate(betaKeys);

    // alpha: no retention, graces of seconds. beta: the defaults (a day's retention, 15 min for
    // a stuck start, 5 min for a silent agent, 2 min for a finished job's user).
    const a = reaper('alpha', {
      REAPER_RETENTION_SECONDS: '0',
      REAPER_ORPHAN_GRACE_SECONDS: '1',
      REAPER_SANDBOX_GRACE_SECONDS: '0',
      REAPER_STARTING_TIMEOUT_SECONDS: '10',
      REAPER_HEARTBEAT_GRACE_SECONDS: '5',
      REAPER_DISPATCHER_ABSENT_SECONDS: '5',
    });
    const b = reaper('beta', {});

    // alpha ends its own: the stuck start and the silent sandbox failed, then (no retention) all
    // five deleted.
    const alphaIds = [alpha.finished, alpha.ancient, alpha.legacy, alpha.starting, alpha.running];
    await pollUntil(
      "alpha's own jobs reaped",
      async () => (await Promise.all(alphaIds.map((id) => alpha.store.get(id)))).every((r) => r === null),
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    // Two more full passes of each, for good measure.
    await Promise.all([passes(a, 2), passes(b, 2)]);
    const alphaUsers = await alpha.acl.listJobIds();
    expect(alphaUsers).not.toContain(alpha.finished);
    expect(alphaUsers).not.toContain(alpha.vanished);
    expect(alphaUsers).toContain(alpha.member);
    expect(alphaUsers).toContain(alpha.booting);

    // beta: what its own settings keep is still there, untouched by alpha.
    expect((await beta.store.get(beta.finished))?.state).toBe('cancelled');
    expect(await own.redis.xlen(betaKeys.sandbox(beta.finished).events)).toBeGreaterThan(0);
    expect(await own.redis.llen(betaKeys.sandbox(beta.finished).results)).toBe(1);
    expect((await beta.store.get(beta.legacy))?.state).toBe('cancelled');
    expect((await beta.store.get(beta.starting))?.state).toBe('starting');
    expect((await beta.store.get(beta.running))?.state).toBe('running');
    const users = await beta.acl.listJobIds();
    expect(users).toContain(beta.finished);
    expect(users).toContain(beta.member);
    expect(users).toContain(beta.booting);
    expect(users).toContain(beta.vanished);
    // What beta's settings end, beta ends: its two-day-old job, and nothing of alpha's.
    expect(await beta.store.get(beta.ancient)).toBeNull();
    expect([total(b, 'jobsDeleted'), total(b, 'jobsFailed')]).toEqual([1, 0]);
    expect([total(a, 'jobsDeleted'), total(a, 'jobsFailed')]).toEqual([5, 2]);

    for (const p of [a, b]) {
      p.signal('SIGTERM');
      expect(await p.exitCode()).toBe(0);
    }
  }, 120_000);
});
