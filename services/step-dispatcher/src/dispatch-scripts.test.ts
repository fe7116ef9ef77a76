import { randomBytes } from 'node:crypto';
import { createKeySpace, DispatchKeys, JobStore, parseJobSpec } from '@sandstream/bus';
import { testRedisUrl } from '@sandstream/test-support';
import { encodeCancel, resultKey } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import {
  advanceScript,
  cancelScript,
  claimDueScript,
  finishScript,
  startScript,
} from './dispatch-scripts.js';

// Each dispatch script's replies, straight against Redis: what the service test can only see
// through their effects (no step pushed twice, a cancel that wins) is checked here reply by reply.
const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
const ns = `t-dscripts-${randomBytes(4).toString('hex')}`;
const keySpace = createKeySpace(ns);
const dispatchKeys = new DispatchKeys(keySpace, 2);
const store = new JobStore({ redis, keys: keySpace });
const jobIds: string[] = [];

afterAll(async () => {
  for (const id of jobIds) {
    await store.delete(id);
    await redis.unlink(dispatchKeys.dispatchState(id));
  }
  redis.disconnect();
});

type Reply = (string | number)[];
let seq = 0;

/** A job record in `running` with `steps` steps (step-1 …), and the keys the scripts take. */
async function job(steps = 3, options: { continueOnError?: boolean } = {}) {
  const id = `${ns}-j${++seq}`;
  jobIds.push(id);
  const spec = parseJobSpec({
    id,
    image: 'x',
    steps: Array.from({ length: steps }, () => ({ command: 'true', ...options })),
  });
  await store.create(spec);
  const k = keySpace.sandbox(id);
  const state = dispatchKeys.dispatchState(id);
  const stepArgs = (n: number) => {
    const args: (string | number)[] = [Date.now()];
    for (let i = 0; i < n; i++) {
      const stepId = `step-${i + 1}`;
      args.push(stepId, JSON.stringify({ stepId, kind: 'run' }), 30, options.continueOnError ? 1 : 0);
    }
    return args;
  };
  return {
    id,
    start: () => startScript.run<Reply>(redis, [state, k.in, keySpace.job(id)], stepArgs(steps)),
    advance: (stepId: string, result = '') =>
      advanceScript.run<Reply>(
        redis,
        [state, k.in, resultKey(k, stepId), keySpace.job(id)],
        [stepId, result],
      ),
    finish: (outcome: string, reason: string, stepId: string) =>
      finishScript.run<Reply>(
        redis,
        [state, k.control],
        [outcome, reason, stepId, stepId ? encodeCancel(stepId, reason) : ''],
      ),
    cancel: (stepId: string) =>
      cancelScript.run<Reply>(
        redis,
        [state, k.control],
        [stepId, stepId ? encodeCancel(stepId, 'stop') : ''],
      ),
    /** The agent's half of a step: its result on its own key. */
    result: (stepId: string, exitCode = 0) =>
      redis.set(
        resultKey(k, stepId),
        JSON.stringify({
          schemaVersion: 1,
          stepId,
          exitCode,
          timedOut: false,
          durationSeconds: 0.1,
          errorMessage: null,
        }),
      ),
    pushed: async () =>
      (await redis.lrange(k.in, 0, -1)).map((s) => (JSON.parse(s) as { stepId: string }).stepId).reverse(),
    control: async () => (await redis.lrange(k.control, 0, -1)).map((s) => JSON.parse(s) as unknown),
  };
}

describe('dispatch-start', () => {
  it('pushes the first step once: a redelivered start answers with the step pushed before', async () => {
    const j = await job();
    expect(await j.start()).toEqual(['pushed', 0, 'step-1', '30']);
    expect(await j.start()).toEqual(['pushed', 0, 'step-1', '30']);
    expect(await j.pushed()).toEqual(['step-1']);
  });

  it('pushes nothing for a job whose cancel was requested, and keeps that answer', async () => {
    const j = await job();
    await store.requestCancel(j.id, 'changed my mind');
    expect(await j.start()).toEqual(['finished', 'cancelled', 'cancelled: changed my mind', 1]);
    expect(await j.start()).toEqual(['finished', 'cancelled', 'cancelled: changed my mind', 0]);
    expect(await j.pushed()).toEqual([]);
  });
});

describe('dispatch-advance', () => {
  it('answers unknown for a job never started', async () => {
    const j = await job();
    expect(await j.advance('step-1')).toEqual(['unknown']);
  });

  it('answers missing while the running step has no result on the list', async () => {
    const j = await job();
    await j.start();
    expect(await j.advance('step-1')).toEqual(['missing']);
    expect(await j.pushed()).toEqual(['step-1']);
  });

  it('records the result and pushes the next step; a notice for any other step is stale and pushes nothing', async () => {
    const j = await job();
    await j.start();
    await j.result('step-1');
    expect(await j.advance('step-1')).toEqual(['pushed', 1, 'step-2', '30']);
    expect((await store.get(j.id))?.stepResults['step-1']?.exitCode).toBe(0);
    // step-1 again, with its result readable again (an agent retrying its LPUSH): still stale.
    await j.result('step-1');
    expect(await j.advance('step-1')).toEqual(['stale', 'step-2']);
    expect(await j.advance('step-3')).toEqual(['stale', 'step-2']);
    expect(await j.pushed()).toEqual(['step-1', 'step-2']);
  });

  it('reads only the result key of the step it expects, whatever else the sandbox wrote', async () => {
    const j = await job();
    await j.start();
    const k = keySpace.sandbox(j.id);
    // What a hostile step can do with its own Redis user: a flooded results list, big values
    // under other keys, other steps' keys. None of it is read.
    const forged = JSON.stringify({ stepId: 'step-1', exitCode: 0, padding: 'x'.repeat(100) });
    for (let i = 0; i < 20; i++) await redis.lpush(k.results, ...Array.from({ length: 1000 }, () => forged));
    await redis.set(`${k.prefix}junk`, Buffer.alloc(8 * 1024 * 1024));
    await redis.set(resultKey(k, 'step-2'), forged);
    expect(await j.advance('step-1')).toEqual(['missing']);
    await j.result('step-1');
    expect(await j.advance('step-1')).toEqual(['pushed', 1, 'step-2', '30']);
    expect((await store.get(j.id))?.stepResults['step-1']?.exitCode).toBe(0);
    // Taken: the key is gone, so its bytes are freed and a replayed notice reads nothing.
    expect(await redis.exists(resultKey(k, 'step-1'))).toBe(0);
    await redis.unlink(k.results, `${k.prefix}junk`);
  });

  it('drops a result key that is not a string or too large, and fails the step once on one not its own', async () => {
    const j = await job();
    await j.start();
    const k = keySpace.sandbox(j.id);
    // A list under the step's key: not a result, dropped (the step ends at its deadline).
    await redis.lpush(resultKey(k, 'step-1'), 'x');
    expect(await j.advance('step-1')).toEqual(['missing']);
    expect(await redis.exists(resultKey(k, 'step-1'))).toBe(0);
    // Larger than any result can be: dropped unread.
    await redis.setrange(resultKey(k, 'step-1'), 17 * 1024 * 1024, 'x');
    expect(await j.advance('step-1')).toEqual(['missing']);
    expect(await redis.exists(resultKey(k, 'step-1'))).toBe(0);
    // Readable but not this step's result: the step fails, once, for good.
    await redis.set(resultKey(k, 'step-1'), JSON.stringify({ stepId: 'step-9', exitCode: 0 }));
    expect(await j.advance('step-1')).toEqual([
      'finished',
      'failed',
      "step step-1 failed: the agent wrote a result that is not this step's",
      1,
    ]);
    await j.result('step-1');
    expect(await j.advance('step-1')).toEqual([
      'finished',
      'failed',
      "step step-1 failed: the agent wrote a result that is not this step's",
      0,
    ]);
  });

  it('finishes on the first failure, and a finished job answers with its first outcome', async () => {
    const j = await job();
    await j.start();
    await j.result('step-1', 3);
    expect(await j.advance('step-1')).toEqual(['finished', 'failed', 'step step-1 exited 3', 1]);
    expect(await j.advance('step-1')).toEqual(['finished', 'failed', 'step step-1 exited 3', 0]);
    expect(await j.pushed()).toEqual(['step-1']);
  });

  it("a finished job answers a notice for a step not its own (its destroy's shutdown) as stale, not with its outcome", async () => {
    const j = await job(2);
    await j.start();
    await j.result('step-1');
    expect(await j.advance('step-1')).toEqual(['pushed', 1, 'step-2', '30']);
    await j.result('step-2');
    expect(await j.advance('step-2')).toEqual(['finished', 'succeeded', 'all 2 steps done', 1]);
    // The agent reports the shutdown step as it reports any other: a result and a notice.
    await j.result('shutdown-1');
    expect(await j.advance('shutdown-1')).toEqual(['stale', '']);
    // Its own steps' notices, redelivered, still answer with the outcome (a finalize is completed).
    expect(await j.advance('step-1')).toEqual(['finished', 'succeeded', 'all 2 steps done', 0]);
    expect(await j.advance('step-2')).toEqual(['finished', 'succeeded', 'all 2 steps done', 0]);
  });

  it('goes on after a failure with continueOnError and succeeds after the last step', async () => {
    const j = await job(2, { continueOnError: true });
    await j.start();
    await j.result('step-1', 1);
    expect(await j.advance('step-1')).toEqual(['pushed', 1, 'step-2', '30']);
    await j.result('step-2');
    expect(await j.advance('step-2')).toEqual(['finished', 'succeeded', 'all 2 steps done', 1]);
  });

  it('says "1 step done" for a one-step job (the CLI shows the reason as it is)', async () => {
    const j = await job(1);
    await j.start();
    await j.result('step-1');
    expect(await j.advance('step-1')).toEqual(['finished', 'succeeded', '1 step done', 1]);
  });

  it('finishes cancelled when the cancel flag is set, even after a successful step', async () => {
    const j = await job();
    await j.start();
    await store.requestCancel(j.id, 'stop now');
    await j.result('step-1');
    expect(await j.advance('step-1')).toEqual(['finished', 'cancelled', 'cancelled: stop now', 1]);
    expect(await j.pushed()).toEqual(['step-1']);
    expect((await store.get(j.id))?.stepResults['step-1']).toBeDefined();
  });

  it('takes a synthesized result instead of the key (a deadline)', async () => {
    const j = await job(1);
    await j.start();
    const timedOut = JSON.stringify({
      schemaVersion: 1,
      stepId: 'step-1',
      exitCode: null,
      timedOut: true,
      durationSeconds: 0,
      errorMessage: 'no result',
    });
    expect(await j.advance('step-1', timedOut)).toEqual([
      'finished',
      'timed-out',
      'step step-1 timed out',
      1,
    ]);
  });
});

describe('dispatch-finish', () => {
  it('answers unknown without state, stale when another step runs, then cancels the running one', async () => {
    const j = await job();
    expect(await j.finish('timed-out', 'too slow', '')).toEqual(['unknown']);
    await j.start();
    expect(await j.finish('timed-out', 'too slow', '')).toEqual(['stale', 'step-1']);
    expect(await j.control()).toEqual([]);
    expect(await j.finish('timed-out', 'too slow', 'step-1')).toEqual([
      'finished',
      'timed-out',
      'too slow',
      1,
    ]);
    expect(await j.control()).toEqual([
      { schemaVersion: 1, kind: 'cancel', stepId: 'step-1', reason: 'too slow' },
    ]);
    expect(await j.finish('failed', 'later', 'step-1')).toEqual(['finished', 'timed-out', 'too slow', 0]);
    expect(await j.control()).toHaveLength(1);
  });
});

describe('dispatch-cancel', () => {
  it('answers unknown before dispatch, stale for another step, signals the running one, and finished after', async () => {
    const j = await job();
    expect(await j.cancel('')).toEqual(['unknown']);
    await j.start();
    expect(await j.cancel('step-2')).toEqual(['stale', 'step-1']);
    expect(await j.cancel('step-1')).toEqual(['signalled', 'step-1']);
    expect(await j.control()).toEqual([
      { schemaVersion: 1, kind: 'cancel', stepId: 'step-1', reason: 'stop' },
    ]);
    await j.finish('cancelled', 'gave up', 'step-1');
    expect(await j.cancel('step-1')).toEqual(['finished', 'cancelled', 'gave up', 0]);
  });
});

describe('claim-due-deadlines', () => {
  it('claims only due members and leases them into the future', async () => {
    const key = dispatchKeys.deadlines(0);
    await redis.zadd(key, 100, 'due-a', 200, 'due-b', 10_000, 'later');
    try {
      // With the earliest score left, which the sweeper sleeps until.
      expect(await claimDueScript.run(redis, [key], [500, 30_000, 10])).toEqual([
        ['due-a', 'due-b'],
        '10000',
      ]);
      expect(await claimDueScript.run(redis, [key], [500, 30_000, 10])).toEqual([[], '10000']);
      expect(Number(await redis.zscore(key, 'due-a'))).toBe(30_000);
      await redis.zrem(key, 'due-a', 'due-b', 'later');
      expect(await claimDueScript.run(redis, [key], [500, 30_000, 10])).toEqual([[], null]);
    } finally {
      await redis.unlink(key);
    }
  });
});
