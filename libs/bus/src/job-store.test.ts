import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { parseJobSpec } from './job-spec.js';
import { decodeJobEventFields } from './job-state.js';
import { JobStore } from './job-store.js';
import { createKeySpace } from './key-space.js';

const redis = connectTestRedis();
const suffix = uniqueSuffix();
const keys = createKeySpace(`t-${suffix}`);
const store = new JobStore({ redis, keys });
const created: string[] = [];

function spec(id: string, tenant = 'acme') {
  const jobId = `js-${suffix}-${id}`;
  created.push(jobId);
  return parseJobSpec({ id: jobId, tenant, image: 'debian', steps: [{ command: 'true' }] });
}

afterAll(async () => {
  for (const id of created) await store.delete(id, 'acme');
  const leftovers = await redis.keys(`t-${suffix}:*`);
  if (leftovers.length) await redis.unlink(...leftovers);
  redis.disconnect();
});

describe('job store', () => {
  it("a progress event goes on a starting job's timeline with its vouched copy, and on no other state", async () => {
    const s = spec('progress');
    await store.create(s);
    const id = s.id!;
    const progress = {
      phase: 'image-pull' as const,
      image: 'localhost:5000/x:1',
      layers: 2,
      layersDone: 1,
      downloadedBytes: 1000,
      totalBytes: 5000,
      done: false,
    };
    expect(await store.recordProgress(id, progress, 'pulling')).toBe(false);
    await store.transition(id, ['queued'], 'scheduled');
    await store.transition(id, ['scheduled'], 'starting');
    expect(await store.recordProgress(id, progress, 'pulling image x')).toBe(true);
    const entries = await redis.xrange(keys.sandbox(id).events, '-', '+');
    const [entryId, fields] = entries.at(-1)!;
    const event = decodeJobEventFields(fields);
    expect(event).toMatchObject({
      type: 'progress',
      from: 'starting',
      to: 'starting',
      reason: 'pulling image x',
      progress,
    });
    // The copy a follower trusts (vouchedEntries) is the same JSON.
    expect(await redis.hget(keys.job(id), `ev:${entryId}`)).toBe(fields[1]);
    await store.transition(id, ['starting'], 'running');
    expect(await store.recordProgress(id, progress, 'late')).toBe(false);
    await expect(store.recordProgress(id, { ...progress, layers: -1 }, 'bad')).rejects.toThrow(/layers/);
  });

  it('creates once per id (idempotent submit)', async () => {
    const s = spec('dup');
    const first = await store.create(s);
    const second = await store.create(s);
    expect(first).toEqual({ created: true, jobId: s.id });
    expect(second).toEqual({ created: false, jobId: s.id });
    const job = await store.get(s.id!);
    expect(job).toMatchObject({ state: 'queued', tenant: 'acme', version: 1 });
    const stored = await store.getSpec(s.id!);
    // A job's spec (a live sandbox's has no steps): anything else fails the match below.
    expect(stored && 'steps' in stored ? stored.steps[0] : stored).toMatchObject({ command: 'true' });
  });

  it('transitions by compare-and-set; repeating is a no-op; wrong state is a conflict', async () => {
    const s = spec('cas');
    await store.create(s);
    const id = s.id!;
    expect(await store.transition(id, ['queued'], 'scheduled')).toMatchObject({
      status: 'ok',
      from: 'queued',
    });
    expect(await store.transition(id, ['queued'], 'scheduled')).toEqual({
      status: 'noop',
      state: 'scheduled',
    });
    expect(await store.transition(id, ['starting'], 'running')).toEqual({
      status: 'conflict',
      state: 'scheduled',
    });
    const ok = await store.transition(id, ['scheduled'], 'starting', {
      sandbox: { backend: 'inprocess', id: '123' },
    });
    expect(ok.status).toBe('ok');
    await store.transition(id, ['starting'], 'running');
    await store.transition(id, ['running'], 'failed', { reason: 'step step-1 exited 2' });
    const job = await store.get(id);
    expect(job).toMatchObject({
      state: 'failed',
      reason: 'step step-1 exited 2',
      sandbox: { backend: 'inprocess', id: '123' },
    });
    expect(job?.finishedAt).toBeGreaterThan(0);
    expect(await store.transition(`nope-${suffix}`, ['queued'], 'scheduled')).toEqual({ status: 'missing' });

    // Every change is on the job's own events stream, in order, under the `job` field.
    const entries = await redis.xrange(keys.sandbox(id).events, '-', '+');
    const events = entries.map(([, fields]) => decodeJobEventFields(fields));
    expect(events.map((e) => e?.to)).toEqual(['queued', 'scheduled', 'starting', 'running', 'failed']);
    expect(events[4]?.reason).toBe('step step-1 exited 2');
    // … and on the capped lifecycle stream.
    const lifecycle = await redis.xrange(keys.lifecycleStream, '-', '+');
    const mine = lifecycle.map(([, f]) => decodeJobEventFields(f)).filter((e) => e?.jobId === id);
    expect(mine).toHaveLength(5);
  });

  it('refuses a move the state table does not allow, changing nothing', async () => {
    const s = spec('forbidden');
    await store.create(s);
    await expect(store.transition(s.id!, ['queued'], 'running')).rejects.toThrow(
      /queued -> running is not an allowed transition/,
    );
    expect(await store.get(s.id!)).toMatchObject({ state: 'queued', version: 1 });
  });

  it('exactly one of many concurrent transitions wins, from 5 connections', async () => {
    const s = spec('race');
    await store.create(s);
    // One connection would serialise the calls in its own command queue, so nothing would race:
    // five connections (five stores, as five service replicas) let Redis interleave them.
    const clients = Array.from({ length: 5 }, () => connectTestRedis());
    try {
      const racers = clients.map((client) => new JobStore({ redis: client, keys }));
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) => racers[i % 5]!.transition(s.id!, ['queued'], 'scheduled')),
      );
      expect(results.filter((r) => r.status === 'ok')).toHaveLength(1);
      expect(results.filter((r) => r.status === 'noop')).toHaveLength(19);
    } finally {
      for (const c of clients) c.disconnect();
    }
  });

  it('lists by tenant and state, verifying the record', async () => {
    const a = spec('list-a', 'acme');
    const b = spec('list-b', 'acme');
    await store.create(a);
    await store.create(b);
    await store.transition(b.id!, ['queued'], 'scheduled');
    const queued = await store.list({ tenant: 'acme', state: 'queued' });
    expect(queued.map((j) => j.id)).toContain(a.id);
    expect(queued.map((j) => j.id)).not.toContain(b.id);
    const scheduled = await store.list({ state: 'scheduled' });
    expect(scheduled.map((j) => j.id)).toContain(b.id);
  });

  it('cancels a queued job on the spot and flags a running one', async () => {
    const q = spec('cancel-q');
    await store.create(q);
    expect(await store.requestCancel(q.id!, 'user said stop')).toEqual({ status: 'cancelled' });
    expect((await store.get(q.id!))?.state).toBe('cancelled');
    expect(await store.requestCancel(q.id!)).toEqual({ status: 'terminal', state: 'cancelled' });

    const r = spec('cancel-r');
    await store.create(r);
    await store.transition(r.id!, ['queued'], 'scheduled');
    expect(await store.requestCancel(r.id!, 'stop')).toEqual({ status: 'requested', state: 'scheduled' });
    expect(await store.isCancelRequested(r.id!)).toBe(true);
    expect(await store.requestCancel(r.id!, 'stop')).toEqual({
      status: 'already-requested',
      state: 'scheduled',
    });
    expect((await store.get(r.id!))?.cancelRequested).toBe('stop');
  });

  it('records step results per step', async () => {
    const s = spec('steps');
    await store.create(s);
    const result = {
      schemaVersion: 1,
      stepId: 'step-1',
      exitCode: 0,
      timedOut: false,
      durationSeconds: 0.5,
      errorMessage: null,
    };
    expect(await store.recordStepResult(s.id!, result)).toBe(true);
    expect((await store.get(s.id!))?.stepResults['step-1']).toMatchObject({ exitCode: 0 });
    expect(await store.recordStepResult(`gone-${suffix}`, result)).toBe(false);
    expect(await redis.exists(`job:{gone-${suffix}}`)).toBe(0);
  });
});
