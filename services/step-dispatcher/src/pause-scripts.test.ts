import { randomBytes } from 'node:crypto';
import {
  bullJobId,
  type CancelRequestPayload,
  createKeySpace,
  JobStore,
  type JobsPayload,
  QueueNames,
  requestPause,
  resumeSandbox,
  SandboxCommands,
  sandboxRecordOf,
} from '@sandstream/bus';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { resultKey } from '@sandstream/wire';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { liveSandboxFixture } from './testing/live-sandbox-fixture.js';

// Pause and resume at the level of their scripts, straight against Redis: the idle pause
// (dispatch-idle with onIdle 'pause'), the pause request (bus sandbox-pause) and resume (bus
// sandbox-resume), with the exec script they must keep out.
const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
const ns = `t-pause-${randomBytes(4).toString('hex')}`;
const keySpace = createKeySpace(ns);
const store = new JobStore({ redis, keys: keySpace });
const commands = new SandboxCommands({ redis, keys: keySpace });
const { dispatchKeys, runningSandbox, cleanup } = liveSandboxFixture({ redis, ns, keySpace, store });
const queueOptions = { connection: redis, prefix: keySpace.bullPrefix };
const cancels = new Queue<CancelRequestPayload>(QueueNames.dispatchCancel, queueOptions);
const jobs = new Queue<JobsPayload>(QueueNames.jobs, queueOptions);

afterAll(async () => {
  await cancels.close();
  await jobs.close();
  await deleteNamespaceKeys(redis, ns);
  await cleanup();
  redis.disconnect();
});

/** A live sandbox opened for commands, as the dispatcher leaves it. */
async function openSandbox(onIdle: 'close' | 'pause' = 'close', idleSeconds = 60) {
  const s = await runningSandbox({ onIdle, idleSeconds });
  const opened = Date.now();
  expect(await s.open(opened)).toEqual(['opened']);
  return {
    ...s,
    opened,
    exec: () => commands.push(s.id, { command: 'true' }),
    /** The agent's end of a command, not yet recorded by a dispatcher. */
    agentResult: (stepId: string) => redis.set(resultKey(keySpace.sandbox(s.id), stepId), '{}'),
    sandboxState: async () => sandboxRecordOf((await store.get(s.id)) ?? (null as never))?.state,
  };
}

describe('pause scripts', () => {
  it("an idle sandbox whose spec says onIdle 'pause' is paused, not closed, and takes no command from the decision on", async () => {
    const s = await openSandbox('pause', 60);
    expect(await s.idle(s.opened + 61_000)).toEqual(['finished', 'paused', 'idle', 1]);
    expect(await s.exec()).toEqual({ status: 'closing' });
    expect(await s.sandboxState()).toBe('pausing');

    // The default still closes.
    const closing = await openSandbox('close', 60);
    expect(await closing.idle(closing.opened + 61_000)).toEqual(['finished', 'succeeded', 'idle', 1]);
    expect(await closing.sandboxState()).toBe('closing');
  });

  it('a pause request refuses commands at once, names those still running, and asks the dispatcher once', async () => {
    const s = await openSandbox();
    expect(await s.exec()).toMatchObject({ status: 'pushed', commandId: 'cmd-1' });
    expect(await s.exec()).toMatchObject({ status: 'pushed', commandId: 'cmd-2' });
    expect((await s.finishCommand('cmd-1'))[0]).toBe('recorded');
    // Ended in the agent, its result not recorded yet: over, not stopped by the pause.
    expect(await s.exec()).toMatchObject({ status: 'pushed', commandId: 'cmd-3' });
    await s.agentResult('cmd-3');

    expect(await requestPause(store, cancels, s.id)).toEqual({ status: 'requested', stopping: ['cmd-2'] });
    expect(await s.exec()).toEqual({ status: 'closing' });
    expect(await s.sandboxState()).toBe('pausing');
    // Repeated: the same answer, one request for the dispatcher.
    expect(await requestPause(store, cancels, s.id)).toEqual({ status: 'requested', stopping: ['cmd-2'] });
    const asked = await cancels.getJob(`${bullJobId(s.id)}%p`);
    expect(asked?.data).toEqual({ jobId: s.id, reason: 'pause', pause: true });
    expect(await cancels.count()).toBeGreaterThanOrEqual(1);

    // Another tenant's caller does not find it; a sandbox being closed cannot pause.
    expect(await requestPause(store, cancels, s.id, 'other')).toEqual({ status: 'missing' });
    const closing = await openSandbox();
    await store.requestCancel(closing.id, 'user');
    expect(await requestPause(store, cancels, closing.id)).toMatchObject({
      status: 'refused',
      closing: true,
    });
  });

  it('resume puts a paused sandbox back in the queue under its id, as a new life; a close of a paused one ends it at once', async () => {
    const s = await openSandbox();
    await s.exec();
    await requestPause(store, cancels, s.id);
    // What the dispatcher's finalize does (step-dispatcher.ts).
    expect(
      (await store.transition(s.id, ['running'], 'paused', { reason: 'pause', pausedAt: 1234 })).status,
    ).toBe('ok');
    // Until pod-lifecycle kept its files and tore its sandbox down, it is pausing, and a resume waits.
    await store.setSandbox(s.id, { backend: 'inprocess', id: 'x' });
    expect(await s.sandboxState()).toBe('pausing');
    expect(await resumeSandbox(store, jobs, dispatchKeys, s.id)).toEqual({ status: 'pausing' });
    await store.clearSandbox(s.id);
    expect(await s.sandboxState()).toBe('paused');
    expect(sandboxRecordOf((await store.get(s.id)) as never)).toMatchObject({ pausedAt: 1234, resumes: 0 });
    expect(await requestPause(store, cancels, s.id)).toEqual({ status: 'paused' });
    expect(await s.exec()).toEqual({ status: 'not-ready', state: 'paused' });

    expect(await resumeSandbox(store, jobs, dispatchKeys, s.id)).toEqual({ status: 'resumed', resumes: 1 });
    const record = await store.get(s.id);
    expect(record).toMatchObject({ state: 'queued', commandsRunning: 0, resumes: 1, commandSeq: 1 });
    expect(record?.closing).toBeUndefined();
    expect(record?.readyAt).toBeUndefined();
    expect(await redis.exists(dispatchKeys.dispatchState(s.id))).toBe(0);
    // Its new life is queued under an id of its own (the first life's stays taken in BullMQ).
    expect((await jobs.getJob(bullJobId(s.id, 1)))?.data).toEqual({ jobId: s.id });
    expect(await redis.zscore(keySpace.jobsByState('queued'), s.id)).not.toBeNull();
    expect(await redis.zscore(keySpace.jobsByState('paused'), s.id)).toBeNull();
    // Resuming what is not paused changes nothing.
    expect(await resumeSandbox(store, jobs, dispatchKeys, s.id)).toEqual({
      status: 'not-paused',
      state: 'queued',
    });

    const other = await openSandbox();
    await requestPause(store, cancels, other.id);
    await store.transition(other.id, ['running'], 'paused', { reason: 'pause' });
    expect(await store.requestCancel(other.id, 'user')).toEqual({ status: 'cancelled' });
    expect(await other.sandboxState()).toBe('closed');
    expect(await resumeSandbox(store, jobs, dispatchKeys, other.id)).toEqual({
      status: 'not-paused',
      state: 'cancelled',
    });
  });
});
