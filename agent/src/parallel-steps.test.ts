import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StepInput, StepResult } from '@sandstream/wire';
import { describe, expect, it, vi } from 'vitest';
import {
  type AgentProcess,
  deleteKeys,
  isAlive,
  POLL,
  popResult,
  pushStep,
  readEvents,
  startAgent,
  stopAgent,
} from './testing/agent-harness.js';
import { useTestRedis } from './testing/test-redis.js';

// Steps marked `parallel` (the commands of a live sandbox) run side by side; raw steps keep FIFO.

const { redis, cleanups } = useTestRedis();

function agent(extraArgs: string[] = []): AgentProcess {
  const workdir = mkdtempSync(join(tmpdir(), 'sandstream-parallel-'));
  const started = startAgent({ extraArgs: ['--workdir', workdir, ...extraArgs] });
  cleanups.push(
    () => deleteKeys(redis, started.keys),
    () => stopAgent(started),
    async () => rmSync(workdir, { recursive: true, force: true }),
  );
  return started;
}

/** A step whose shell prints its own pid and a background grandchild's, then waits a minute. */
function treeStep(stepId: string, parallel: boolean): StepInput {
  return {
    schemaVersion: 1,
    stepId,
    command: 'sleep 60 & echo $$ $!; sleep 60',
    shell: true,
    parallel,
  };
}

async function pidsPrinted(a: AgentProcess, stepId: string): Promise<number[]> {
  const line = await vi.waitUntil(async () => {
    const events = await readEvents(redis, a.keys, stepId);
    return events.find((e) => e.kind === 'stdout')?.line;
  }, POLL);
  return line.split(' ').map(Number);
}

function cancel(stepId: string): string {
  return JSON.stringify({ schemaVersion: 1, kind: 'cancel', stepId, reason: 'test' });
}

async function popResults(a: AgentProcess, count: number): Promise<StepResult[]> {
  const results: StepResult[] = [];
  for (let i = 0; i < count; i++) results.push(await popResult(redis, a.keys));
  return results;
}

describe('parallel steps', () => {
  it('answer file reads and short commands while a long parallel step runs, and cancel only the one named', async () => {
    const a = agent();
    await pushStep(redis, a.keys, treeStep('build', true));
    const buildPids = await pidsPrinted(a, 'build');
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'write',
      kind: 'writeFile',
      path: 'notes.txt',
      content: 'hello',
      parallel: true,
    });
    expect(await popResult(redis, a.keys)).toMatchObject({ stepId: 'write', exitCode: 0 });
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'read-1',
      kind: 'readFile',
      path: 'notes.txt',
      parallel: true,
    });
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'read-2',
      kind: 'readFile',
      path: 'notes.txt',
      parallel: true,
    });
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'echo',
      command: 'echo',
      args: ['hi'],
      parallel: true,
    });
    const answered = await popResults(a, 3);
    expect(answered.map((r) => r.stepId).sort()).toEqual(['echo', 'read-1', 'read-2']);
    for (const r of answered.filter((r) => r.stepId !== 'echo')) {
      expect(r.output).toMatchObject({ kind: 'readFile', content: 'hello' });
    }
    // The build was not waited for: it still runs, with its whole tree.
    expect(buildPids.every(isAlive)).toBe(true);
    expect(await redis.llen(a.keys.results)).toBe(0);

    await redis.lpush(a.keys.control, cancel('build'));
    expect(await popResult(redis, a.keys)).toMatchObject({
      stepId: 'build',
      cancelled: true,
      errorCode: 'cancelled',
    });
    await vi.waitUntil(async () => (buildPids.some(isAlive) ? undefined : true), POLL);

    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await a.exited).code).toBe(0);
  });

  it('a step without the mark waits for the parallel steps before it, in FIFO order', async () => {
    const a = agent();
    await pushStep(redis, a.keys, treeStep('long', true));
    const pids = await pidsPrinted(a, 'long');
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'fifo', command: 'echo', args: ['after'] });
    // The parallel step behind the FIFO one waits for it too: nothing overtakes an unmarked step.
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'later',
      command: 'echo',
      args: ['x'],
      parallel: true,
    });
    // Only `long` ending lets the rest go on; until then no result at all arrives.
    await redis.lpush(a.keys.control, cancel('long'));
    const order = (await popResults(a, 3)).map((r) => r.stepId);
    expect(order).toEqual(['long', 'fifo', 'later']);
    await vi.waitUntil(async () => (pids.some(isAlive) ? undefined : true), POLL);
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await a.exited).code).toBe(0);
  });

  it('a shutdown kills every parallel step still running and delivers their results first', async () => {
    const a = agent();
    await pushStep(redis, a.keys, treeStep('one', true));
    await pushStep(redis, a.keys, treeStep('two', true));
    const pids = [...(await pidsPrinted(a, 'one')), ...(await pidsPrinted(a, 'two'))];
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    const results = await popResults(a, 3);
    expect(results.at(-1)).toMatchObject({ stepId: 'bye', exitCode: 0 });
    for (const r of results.slice(0, 2)) expect(r).toMatchObject({ cancelled: true, errorCode: 'cancelled' });
    expect((await a.exited).code).toBe(0);
    await vi.waitUntil(async () => (pids.some(isAlive) ? undefined : true), POLL);
  });

  it('refuses a second step with the id of one still running, and leaves the first alone', async () => {
    const a = agent();
    await pushStep(redis, a.keys, treeStep('same', true));
    const pids = await pidsPrinted(a, 'same');
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'same', command: 'true', parallel: true });
    expect(await popResult(redis, a.keys)).toMatchObject({
      stepId: 'same',
      errorCode: 'invalid_step',
      errorMessage: 'step same is already running',
    });
    expect(pids.every(isAlive)).toBe(true);
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    await popResults(a, 2);
    expect((await a.exited).code).toBe(0);
  });

  it('holds back the next parallel step at --max-parallel-steps until one ends', async () => {
    const a = agent(['--max-parallel-steps', '2']);
    await pushStep(redis, a.keys, treeStep('p1', true));
    await pushStep(redis, a.keys, treeStep('p2', true));
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'p3',
      command: 'echo',
      args: ['third'],
      parallel: true,
    });
    await pidsPrinted(a, 'p1');
    await pidsPrinted(a, 'p2');
    // p3 stays in Redis, not in the agent, while two run (without the limit it was popped at once).
    expect(await redis.llen(a.keys.in)).toBe(1);
    await redis.lpush(a.keys.control, cancel('p1'));
    const [first, second] = await popResults(a, 2);
    expect(first).toMatchObject({ stepId: 'p1', cancelled: true });
    expect(second).toMatchObject({ stepId: 'p3', exitCode: 0 });
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    await popResults(a, 2);
    expect((await a.exited).code).toBe(0);
  });
});

describe('cancels of steps not started yet', () => {
  it('a parallel step cancelled while it waited in :in is answered cancelled, never run', async () => {
    const a = agent(['--max-parallel-steps', '1']);
    await pushStep(redis, a.keys, treeStep('busy', true));
    await pidsPrinted(a, 'busy');
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'queued',
      command: 'sh',
      args: ['-c', 'echo ran'],
      parallel: true,
    });
    // The agent is at its limit: `queued` waits in Redis while its cancel arrives.
    expect(await redis.llen(a.keys.in)).toBe(1);
    await redis.lpush(a.keys.control, cancel('queued'));
    await redis.lpush(a.keys.control, cancel('busy'));
    const results = await popResults(a, 2);
    expect(results.map((r) => r.stepId)).toEqual(['busy', 'queued']);
    expect(results[1]).toMatchObject({ cancelled: true, errorCode: 'cancelled', exitCode: null });
    expect((await readEvents(redis, a.keys, 'queued')).filter((e) => e.kind === 'stdout')).toEqual([]);
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await a.exited).code).toBe(0);
  });

  it('background steps run outside the parallel limit, and a cancel may name its first signal', async () => {
    const a = agent(['--max-parallel-steps', '1']);
    // A server that reports SIGINT before it exits, in the background.
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'server',
      command: "trap 'echo got-int; exit 0' INT; echo up; while true; do sleep 0.1; done",
      shell: true,
      parallel: true,
      background: true,
    });
    await vi.waitUntil(
      async () => (await readEvents(redis, a.keys, 'server')).some((e) => e.line === 'up'),
      POLL,
    );
    // The one parallel slot is still free for a command.
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'cmd',
      command: 'echo',
      args: ['hi'],
      parallel: true,
    });
    expect(await popResult(redis, a.keys)).toMatchObject({ stepId: 'cmd', exitCode: 0 });
    await redis.lpush(
      a.keys.control,
      JSON.stringify({ schemaVersion: 1, kind: 'cancel', stepId: 'server', signal: 'SIGINT' }),
    );
    expect(await popResult(redis, a.keys)).toMatchObject({ stepId: 'server', cancelled: true });
    expect((await readEvents(redis, a.keys, 'server')).map((e) => e.line)).toContain('got-int');
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await a.exited).code).toBe(0);
  });
});

describe('idleness', () => {
  it('a running parallel step is not idle time: the agent stays past its idle limit until it ends', async () => {
    // Idle limit 0.2 s; the step takes 2 s.
    const a = agent(['--idle-timeout-seconds', '0.1', '--max-idle-waits', '2']);
    await pushStep(redis, a.keys, {
      schemaVersion: 1,
      stepId: 'slow',
      command: 'sleep',
      args: ['2'],
      parallel: true,
    });
    expect(await popResult(redis, a.keys)).toMatchObject({ stepId: 'slow', exitCode: 0 });
    // With nothing running, the idle limit applies again.
    expect((await a.exited).code).toBe(2);
  });

  it('--max-idle-waits 0 never exits on idleness (a live sandbox waits for its client)', async () => {
    const a = agent(['--idle-timeout-seconds', '0.05', '--max-idle-waits', '0', '--verbose']);
    // Twenty empty pops are far past any idle limit the agent could be applying.
    await vi.waitUntil(
      async () => (a.logs().filter((l) => l.msg === 'idle').length >= 20 ? true : undefined),
      { ...POLL, timeout: 30_000 },
    );
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'still-here', command: 'true' });
    expect(await popResult(redis, a.keys)).toMatchObject({ stepId: 'still-here', exitCode: 0 });
    await pushStep(redis, a.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await a.exited).code).toBe(0);
  });
});
