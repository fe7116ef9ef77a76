import { randomBytes } from 'node:crypto';
import {
  createKeySpace,
  JobStore,
  SANDBOX_HISTORY_LIMIT,
  SANDBOX_MAX_RUNNING_COMMANDS,
  SandboxCommands,
} from '@sandstream/bus';
import { testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { liveSandboxFixture } from './testing/live-sandbox-fixture.js';

// The live-sandbox scripts' replies, straight against Redis: dispatch-open, the live branch of
// dispatch-advance, dispatch-idle, and bus sandbox-exec (SandboxCommands), which they work with.
const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
const ns = `t-lscripts-${randomBytes(4).toString('hex')}`;
const keySpace = createKeySpace(ns);
const store = new JobStore({ redis, keys: keySpace });
const commands = new SandboxCommands({ redis, keys: keySpace });
const { dispatchKeys, runningSandbox, cleanup } = liveSandboxFixture({ redis, ns, keySpace, store });

afterAll(async () => {
  await cleanup();
  redis.disconnect();
});

/** A live sandbox's record in `running` (as pod-lifecycle leaves it), not yet opened. */
async function sandbox(idleSeconds = 60) {
  const s = await runningSandbox({ idleSeconds });
  return { ...s, exec: () => commands.push(s.id, { command: 'true' }) };
}

describe('live sandbox scripts', () => {
  it('open writes the end and its cap with readyAt, so a client woken by ready can move the end at once', async () => {
    const s = await sandbox();
    const now = Date.now();
    expect(await s.open(now, { endsAt: now + 4_000, maxEndsAt: now + 60_000 })).toEqual(['opened']);
    const fields = await redis.hmget(keySpace.job(s.id), 'readyAt', 'endsAt', 'maxEndsAt');
    expect(fields).toEqual([String(now), String(now + 4_000), String(now + 60_000)]);
    // A client moved the end (setTimeout); a redelivered open leaves it where the client put it.
    await redis.hset(keySpace.job(s.id), 'endsAt', now + 10_000);
    expect(await s.open(now + 5, { endsAt: now + 4_005, maxEndsAt: now + 60_005 })).toEqual(['opened']);
    expect(await redis.hget(keySpace.job(s.id), 'endsAt')).toBe(String(now + 10_000));
  });

  it('exec is refused until the dispatcher opened the sandbox, then pushes a parallel step once', async () => {
    const s = await sandbox();
    expect(await s.exec()).toMatchObject({ status: 'not-ready', state: 'running' });
    expect(await s.open()).toEqual(['opened']);
    // A redelivered dispatch finds it open, and changes nothing.
    expect(await s.open()).toEqual(['opened']);
    const pushed = await s.exec();
    // A refused command takes no number.
    expect(pushed).toMatchObject({ status: 'pushed', commandId: 'cmd-1' });
    const queued = await redis.lrange(keySpace.sandbox(s.id).in, 0, -1);
    expect(queued.map((raw) => JSON.parse(raw))).toMatchObject([
      { stepId: 'cmd-1', parallel: true, kind: 'run' },
    ]);
    expect(await store.get(s.id)).toMatchObject({ kind: 'sandbox', commandsRunning: 1 });
  });

  it('advance records a command result once, counts it finished, and answers missing results', async () => {
    const s = await sandbox();
    await s.open();
    const { commandId } = (await s.exec()) as { commandId: string };
    expect(await s.advance(commandId)).toEqual(['missing']);
    await s.result(commandId);
    expect(await s.advance(commandId)).toEqual(['recorded', commandId]);
    // The redelivered notice: recorded already, nothing counted twice.
    expect(await s.advance(commandId)).toEqual(['recorded', commandId]);
    const record = await store.get(s.id);
    expect(record?.commandsRunning).toBe(0);
    expect(record?.stepResults[commandId]).toMatchObject({ exitCode: 0 });
    expect(await redis.llen(keySpace.sandbox(s.id).results)).toBe(0);
  });

  it('idle: later while a command runs or a call was recent, closes once nothing ran for the limit', async () => {
    const s = await sandbox(10);
    const openedAt = Date.now();
    await s.open(openedAt);
    expect(await s.idle(openedAt + 5_000)).toEqual(['later', openedAt + 10_000]);
    const { commandId } = (await s.exec()) as { commandId: string };
    // A command runs: not idle however long ago the last call was.
    const far = Date.now() + 3_600_000;
    expect(await s.idle(far)).toEqual(['later', far + 10_000]);
    await s.result(commandId);
    await s.advance(commandId);
    const last = Number(await redis.hget(keySpace.job(s.id), 'lastActivityAt'));
    expect(await s.idle(last + 9_000)).toEqual(['later', last + 10_000]);
    expect(await s.idle(last + 10_000)).toEqual(['finished', 'succeeded', 'idle', 1]);
    expect(await s.idle(last + 20_000)).toEqual(['finished', 'succeeded', 'idle', 0]);
  });

  it('a close asked before the sandbox was opened ends it at open; exec then says closing', async () => {
    const s = await sandbox();
    await store.requestCancel(s.id, 'user');
    expect(await s.exec()).toMatchObject({ status: 'not-ready' });
    expect(await s.open()).toEqual(['finished', 'cancelled', 'user', 1]);
    const other = await sandbox();
    await other.open();
    await store.requestCancel(other.id, 'user');
    expect(await other.exec()).toEqual({ status: 'closing' });
    expect(await commands.push(`${ns}-nobody`, { command: 'true' })).toEqual({ status: 'missing' });
    expect(await redis.exists(keySpace.job(`${ns}-nobody`))).toBe(0);
  });

  it('refuses a command past the running limit, but not a background process', async () => {
    const s = await sandbox();
    await s.open();
    for (let i = 0; i < SANDBOX_MAX_RUNNING_COMMANDS; i++) expect((await s.exec()).status).toBe('pushed');
    expect(await s.exec()).toEqual({ status: 'busy', running: SANDBOX_MAX_RUNNING_COMMANDS });
    const server = await commands.push(s.id, { command: 'serve', background: true });
    expect(server.status).toBe('pushed');
    expect((await store.get(s.id))?.commandsRunning).toBe(SANDBOX_MAX_RUNNING_COMMANDS);
  });

  it('the limit counts what is really pending: commands that ended while no dispatcher recorded them do not count', async () => {
    // Issue 27: during a dispatcher outage the agent ends commands (their result keys are SET) but
    // nothing records them, so the counter stayed at 64 while 3 ran and every exec was refused.
    const s = await sandbox();
    await s.open();
    const pushed: string[] = [];
    for (let i = 0; i < SANDBOX_MAX_RUNNING_COMMANDS; i++)
      pushed.push(((await s.exec()) as { commandId: string }).commandId);
    for (const id of pushed.slice(3)) await s.result(id); // ended; no dispatcher records them
    const next = await s.exec();
    expect(next.status).toBe('pushed');
    // Once recorded (the dispatcher back), the counter comes down to what runs: 3 and the new one.
    for (const id of pushed.slice(3)) expect(await s.advance(id)).toEqual(['recorded', id]);
    expect((await store.get(s.id))?.commandsRunning).toBe(4);
    // Truly pending ones are still refused at the limit, with the real number.
    for (let i = 0; i < SANDBOX_MAX_RUNNING_COMMANDS - 4; i++) expect((await s.exec()).status).toBe('pushed');
    expect(await s.exec()).toEqual({ status: 'busy', running: SANDBOX_MAX_RUNNING_COMMANDS });
  });

  it('a counter that leaked (more than the unrecorded commands) is corrected at the limit', async () => {
    const s = await sandbox();
    await s.open();
    const { commandId } = (await s.exec()) as { commandId: string };
    await s.result(commandId);
    await s.advance(commandId);
    await redis.hset(keySpace.job(s.id), 'commandsRunning', SANDBOX_MAX_RUNNING_COMMANDS);
    expect((await s.exec()).status).toBe('pushed');
    expect((await store.get(s.id))?.commandsRunning).toBe(1);
  });

  it('never drops a command still running from the history; records results that come after the close', async () => {
    const s = await sandbox();
    await s.open();
    // cmd-1 runs for ever (no result); 200 more finish.
    const first = (await s.exec()) as { commandId: string };
    for (let i = 0; i < SANDBOX_HISTORY_LIMIT; i++) {
      const { commandId } = (await s.exec()) as { commandId: string };
      await s.result(commandId);
      await s.advance(commandId);
    }
    let record = await store.get(s.id);
    expect(record?.commands[first.commandId]).toBeDefined();
    expect(record?.commandsRunning).toBe(1);
    // Closed meanwhile (idle decided), its result arrives after: still recorded, no longer running.
    await redis.hset(
      dispatchKeys.dispatchState(s.id),
      'status',
      'finished',
      'outcome',
      'cancelled',
      'reason',
      'user',
    );
    await s.result(first.commandId);
    expect(await s.advance(first.commandId)).toEqual(['recorded', first.commandId]);
    record = await store.get(s.id);
    expect(record?.commandsRunning).toBe(0);
    expect(record?.stepResults[first.commandId]).toMatchObject({ exitCode: 0 });
  });

  it('once idle decided to close, a command is refused as closing (same step as the decision)', async () => {
    const s = await sandbox(10);
    const openedAt = Date.now();
    await s.open(openedAt);
    const last = Number(await redis.hget(keySpace.job(s.id), 'lastActivityAt'));
    expect((await s.idle(last + 10_000))[0]).toBe('finished');
    expect(await s.exec()).toEqual({ status: 'closing' });
    expect(await commands.touch(s.id)).toBe(false);
  });

  it('keeps a bounded history: the command 200 places back is dropped with its result', async () => {
    const s = await sandbox();
    await s.open();
    for (let i = 0; i < 201; i++) {
      const { commandId } = (await s.exec()) as { commandId: string };
      await s.result(commandId);
      await s.advance(commandId);
    }
    const record = await store.get(s.id);
    expect(Object.keys(record?.commands ?? {})).toHaveLength(200);
    expect(record?.commands['cmd-1']).toBeUndefined();
    expect(record?.stepResults['cmd-1']).toBeUndefined();
    expect(record?.commands['cmd-201']).toBeDefined();
  });
});
