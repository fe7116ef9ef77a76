import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  bullJobId,
  createKeySpace,
  DispatchKeys,
  type DispatchPayload,
  type JobSpecInput,
  JobStore,
  parseJobSpec,
  QueueNames,
  SlotAdmission,
} from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import {
  type RunningService,
  startAgentProcess,
  startService,
  testRedisUrl,
  uniqueNamespace,
} from '@sandstream/test-support';
import { resultKey } from '@sandstream/wire';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

// The dispatcher as a real process against real agents and the shared Redis; the scheduler and
// pod-lifecycle are played by this suite (agent started, record to `running`, `dispatch` added).
const namespace = uniqueNamespace('disp');
const keySpace = createKeySpace(namespace);
const dispatchKeys = new DispatchKeys(keySpace, 4);
let redis: Redis;
let store: JobStore;
let dispatchQueue: Queue<DispatchPayload>;
let client: SandstreamClient;
let dispatcher: RunningService;
const workdir = mkdtempSync(join(tmpdir(), 'disp-'));
const agents: ReturnType<typeof startAgentProcess>[] = [];

beforeAll(async () => {
  redis = new Redis(testRedisUrl());
  store = new JobStore({ redis, keys: keySpace });
  dispatchQueue = new Queue(QueueNames.dispatch, { connection: redis, prefix: keySpace.bullPrefix });
  client = new SandstreamClient({ redis, namespace });
  dispatcher = await startService('step-dispatcher', {
    SANDSTREAM_NAMESPACE: namespace,
    COMPLETION_SHARDS: '4',
    STEP_GRACE_MS: '2000',
    HEARTBEAT_CHECK_MS: '500',
    HEARTBEAT_GRACE_MS: '500',
    HEARTBEAT_RECONNECT_GRACE_MS: '1000',
  });
});

afterAll(async () => {
  for (const a of agents) if (a.child.exitCode === null) a.child.kill('SIGKILL');
  await dispatcher?.stop();
  await dispatchQueue?.close();
  await client?.close();
  redis?.disconnect();
  rmSync(workdir, { recursive: true, force: true });
});

let seq = 0;
/** Plays scheduler + pod-lifecycle: agent alive, record `running`, dispatch enqueued. */
async function launch(spec: Omit<JobSpecInput, 'image'>, opts: { agent?: boolean } = {}) {
  const jobId = `${namespace}-j${++seq}`;
  await store.create(parseJobSpec({ image: 'none', ...spec, id: jobId }));
  await store.transition(jobId, ['queued'], 'scheduled');
  await store.transition(jobId, ['scheduled'], 'starting');
  const notifyStream = dispatchKeys.completionStreamFor(jobId);
  const agent =
    opts.agent === false
      ? undefined
      : startAgentProcess({
          redisUrl: testRedisUrl(),
          jobId,
          notifyStream,
          workdir,
          heartbeatIntervalMs: 300,
        });
  if (agent) agents.push(agent);
  // Like pod-lifecycle's waitReady: dispatch only once the agent heart-beats.
  const hb = keySpace.sandbox(jobId).heartbeat;
  if (agent)
    await vi.waitUntil(async () => (await redis.exists(hb)) === 1, { timeout: 20_000, interval: 50 });
  // starting -> running is pod-lifecycle's, before it adds the dispatch (docs/services.md).
  await store.transition(jobId, ['starting'], 'running', { reason: 'agent alive' });
  await dispatchQueue.add(
    'dispatch',
    { jobId, sandbox: { jobId, backend: 'inprocess', id: 'test' }, notifyStream },
    { jobId: bullJobId(jobId) },
  );
  return { jobId, agent };
}

async function outputOf(jobId: string): Promise<string[]> {
  const lines: string[] = [];
  for await (const item of client.follow(jobId))
    if (item.type === 'output') lines.push(`${item.stepId}:${item.line}`);
  return lines;
}

describe('step-dispatcher with real agents', () => {
  it('runs the steps one at a time, records each result and succeeds', async () => {
    const marker = join(workdir, `order-${seq + 1}`);
    const { jobId } = await launch({
      steps: [
        { command: `echo one >> ${marker}; echo first`, shell: true },
        { command: `echo two >> ${marker}; echo second`, shell: true },
        { command: 'printf', args: ['%s\\n', 'third'] },
      ],
    });
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record.state).toBe('succeeded');
    expect(Object.keys(record.stepResults).sort()).toEqual(['step-1', 'step-2', 'step-3']);
    expect(record.stepResults['step-3']?.exitCode).toBe(0);
    expect(record.reason).toBe('all 3 steps done');
    expect(readFileSync(marker, 'utf8')).toBe('one\ntwo\n');
    expect(await outputOf(jobId)).toEqual(['step-1:first', 'step-2:second', 'step-3:third']);
    // The sandbox is handed back for destruction (enqueued just after the terminal state that
    // ended the wait above, hence polled).
    const destroy = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix: keySpace.bullPrefix });
    await expect
      .poll(async () => (await destroy.getJob(bullJobId(jobId)))?.data, { timeout: 10_000 })
      .toMatchObject({ jobId, outcome: 'succeeded' });
    await destroy.close();
  });

  it('gives the slot back when the job ends, without waiting for its destroy', async () => {
    // No pod-lifecycle runs in this suite: the destroy stays queued, so a slot that comes back
    // can only have been freed by the dispatcher at the job's end.
    const admission = new SlotAdmission({
      redis,
      keys: keySpace,
      globalLimit: 100,
      tenantLimit: 100,
      leaseMs: 60_000,
    });
    const jobId = `${namespace}-j${seq + 1}`;
    expect(await admission.acquire(jobId, 'default')).toEqual({ granted: true });
    const launched = await launch({ steps: [{ command: 'true' }] });
    expect(launched.jobId).toBe(jobId);
    expect((await client.wait(jobId, { timeoutMs: 20_000 })).state).toBe('succeeded');
    await expect.poll(() => admission.holders(), { timeout: 10_000 }).toEqual([]);
    // The destroy is still to come (enqueued after the release, hence polled), and nobody runs it.
    const destroy = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix: keySpace.bullPrefix });
    await expect
      .poll(async () => (await destroy.getJob(bullJobId(jobId)))?.data, { timeout: 10_000 })
      .toMatchObject({ jobId });
    await destroy.close();
  });

  it("finalizes a job once: its destroy's shutdown step, reported after the end, enqueues no second destroy", async () => {
    const { jobId } = await launch({ steps: [{ command: 'true' }] });
    expect((await client.wait(jobId, { timeoutMs: 20_000 })).state).toBe('succeeded');
    const destroy = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix: keySpace.bullPrefix });
    try {
      await expect
        .poll(async () => (await destroy.getJob(bullJobId(jobId)))?.data, { timeout: 10_000 })
        .toMatchObject({ jobId });
      // pod-lifecycle took it and removed it when done (removeOnComplete), then pushed the
      // shutdown step, which the agent reports like any step: a result and a notice.
      await destroy.remove(bullJobId(jobId));
      const stream = dispatchKeys.completionStreamFor(jobId);
      const shutdown = {
        schemaVersion: 1,
        stepId: 'shutdown-1',
        exitCode: 0,
        timedOut: false,
        durationSeconds: 0,
      };
      await redis.set(resultKey(keySpace.sandbox(jobId), 'shutdown-1'), JSON.stringify(shutdown));
      const id = await redis.xadd(stream, '*', 'jobId', jobId, 'stepId', 'shutdown-1');
      // Handled notices are acknowledged and deleted.
      await expect
        .poll(async () => (await redis.xrange(stream, id as string, id as string)).length, {
          timeout: 10_000,
        })
        .toBe(0);
      expect(await destroy.getJob(bullJobId(jobId))).toBeUndefined();
      expect((await store.get(jobId))?.state).toBe('succeeded');
    } finally {
      await destroy.close();
    }
  });

  it('ignores redelivered and duplicate notices: no step is pushed twice', async () => {
    const marker = join(workdir, `dup-${seq + 1}`);
    const { jobId } = await launch({
      steps: [
        { command: `echo one >> ${marker}`, shell: true },
        { command: `echo two >> ${marker}; sleep 1`, shell: true },
        { command: `echo three >> ${marker}`, shell: true },
      ],
    });
    for await (const item of client.follow(jobId))
      if (item.type === 'step-started' && item.stepId === 'step-2') break;
    // As if a crashed instance's notice were claimed again, or an agent that lost the replies
    // retried its SET of step-1's result and its XADD: the result is readable again, so only
    // the advance script's "is this the running step?" guard keeps step-3 from being pushed now.
    const step1 = JSON.stringify((await store.get(jobId))?.stepResults['step-1']);
    const stream = dispatchKeys.completionStreamFor(jobId);
    for (let i = 0; i < 5; i++) {
      await redis.set(resultKey(keySpace.sandbox(jobId), 'step-1'), step1);
      await redis.xadd(stream, '*', 'jobId', jobId, 'stepId', 'step-1');
    }
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record.state).toBe('succeeded');
    expect(readFileSync(marker, 'utf8')).toBe('one\ntwo\nthree\n');
  });

  it('says "1 step done", not "all 1 steps done", for a one-step job', async () => {
    const { jobId } = await launch({ steps: [{ command: 'true' }] });
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record).toMatchObject({ state: 'succeeded', reason: '1 step done' });
  });

  it('stops at the first failing step', async () => {
    const marker = join(workdir, `never-${seq + 1}`);
    const { jobId } = await launch({
      steps: [{ command: 'true' }, { command: 'exit 3', shell: true }, { command: 'touch', args: [marker] }],
    });
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record.state).toBe('failed');
    expect(record.reason).toMatch(/step-2 exited 3/);
    expect(record.stepResults['step-3']).toBeUndefined();
    expect(() => readFileSync(marker)).toThrow();
  });

  it('goes on after a failing step with continueOnError', async () => {
    const { jobId } = await launch({
      steps: [{ command: 'exit 1', shell: true, continueOnError: true }, { command: 'true' }],
    });
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record.state).toBe('succeeded');
    expect(record.stepResults['step-1']?.exitCode).toBe(1);
    expect(record.stepResults['step-2']?.exitCode).toBe(0);
  });

  it('ends a job whose step times out as timed-out', async () => {
    const { jobId } = await launch({ steps: [{ command: 'sleep', args: ['30'], timeoutSeconds: 1 }] });
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record.state).toBe('timed-out');
    expect(record.stepResults['step-1']?.timedOut).toBe(true);
  });

  it('ends a job past its own timeout as timed-out and kills the running step', async () => {
    const started = Date.now();
    const { jobId } = await launch({ timeoutSeconds: 1.5, steps: [{ command: 'sleep', args: ['30'] }] });
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record.state).toBe('timed-out');
    expect(record.reason).toMatch(/timeout/);
    expect(Date.now() - started).toBeLessThan(6_000);
  });

  it('cancels a running step at once, not when it ends', async () => {
    const { jobId } = await launch({ steps: [{ command: 'sleep', args: ['60'] }, { command: 'true' }] });
    for await (const item of client.follow(jobId)) if (item.type === 'step-started') break;
    const asked = Date.now();
    await client.cancel(jobId);
    const record = await client.wait(jobId, { timeoutMs: 30_000 });
    expect(record.state).toBe('cancelled');
    // The step would run 60 s: a bound far below that, and far above a loaded machine's jitter.
    expect(Date.now() - asked).toBeLessThan(15_000);
    expect(record.stepResults['step-2']).toBeUndefined();
  });

  it('fails a job whose agent stops heart-beating as sandbox lost', async () => {
    const { jobId, agent } = await launch({ steps: [{ command: 'sleep', args: ['60'] }] });
    for await (const item of client.follow(jobId)) if (item.type === 'step-started') break;
    // Kill the agent's whole process group, as a vanished pod would.
    process.kill(-(agent?.child.pid as number), 'SIGKILL');
    const lostAt = Date.now();
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record.state).toBe('failed');
    expect(record.reason).toMatch(/sandbox lost/);
    expect(Date.now() - lostAt).toBeLessThan(15_000);
  });

  it('ends a running job whose agent is gone even when it holds no dispatch state', async () => {
    // Running per the job store (as after a lost dispatch, or an expired dispatch state), no
    // agent: the dispatcher's heartbeat monitor owns it all the same (docs/services.md).
    const jobId = `${namespace}-nostate`;
    await store.create(parseJobSpec({ image: 'none', id: jobId, steps: [{ command: 'true' }] }));
    for (const [from, to] of [
      ['queued', 'scheduled'],
      ['scheduled', 'starting'],
      ['starting', 'running'],
    ] as const)
      await store.transition(jobId, [from], to);
    expect(await redis.exists(dispatchKeys.dispatchState(jobId))).toBe(0);
    const record = await client.wait(jobId, { timeoutMs: 20_000 });
    expect(record.state).toBe('failed');
    expect(record.reason).toMatch(/sandbox lost/);
  });
});
