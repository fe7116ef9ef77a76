import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RunStepSchema } from '@sandstream/wire';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../logger.js';
import { recordingContext } from '../steps/recording-context.js';
import { runStep } from '../steps/run-step.js';
import type { StepContext } from '../steps/step-context.js';
import { builtSpawnerPath } from '../testing/agent-harness.js';
import type { LaunchRequest, ProcessLauncher, StepProcess } from './launcher.js';
import { NodeLauncher } from './node-launcher.js';
import { SpawnerLauncher } from './spawner-launcher.js';

/**
 * Back-pressure on a step's process: pauseOutput() stops reading its output so that it blocks on
 * its own full pipe, resumeOutput() lets it go on. The spawner is one helper for every step and
 * terminal, so pausing one child must not stall the others.
 */
let dir: string;
const launchers: ProcessLauncher[] = [];
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-pause-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => {
  for (const launcher of launchers.splice(0)) launcher.close();
});

const quiet = createLogger({ verbose: false, write: () => {} });
const newSpawner = () => {
  const launcher = new SpawnerLauncher(builtSpawnerPath(), quiet);
  launchers.push(launcher);
  return launcher;
};
const request = (file: string, args: string[] = []): LaunchRequest => ({
  file,
  args,
  cwd: dir,
  env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
});
const spawned = (proc: StepProcess) =>
  new Promise<number>((resolve, reject) => {
    proc.once('spawn', () => resolve(proc.pid as number));
    proc.once('error', reject);
  });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** user + system CPU ticks the process has used (fields 14 and 15 of /proc/<pid>/stat). */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

describe('pausing a process started by the spawner', () => {
  it('blocks only that child (yes) while the other steps and a terminal go on, and resumes it', async () => {
    const launcher = newSpawner();
    const yes = launcher.launch(request('yes'));
    let received = 0;
    yes.on('stdout', (chunk: Buffer) => {
      received += chunk.length;
    });
    const pid = await spawned(yes);
    await vi.waitUntil(() => received > 1_000_000, { timeout: 10_000 });

    yes.pauseOutput();
    // Chunks already on their way arrive (no event marks the last of them); then nothing more
    // over a while: that absence, and the CPU not spent, is what is tested.
    await sleep(300);
    const atPause = received;
    const ticksAtPause = cpuTicks(pid);
    await sleep(700);
    expect(received).toBe(atPause);
    // Blocked in write() on its full pipe: asleep, not spinning.
    expect(cpuTicks(pid) - ticksAtPause).toBeLessThanOrEqual(2);
    expect(readFileSync(`/proc/${pid}/stat`, 'utf8')).toMatch(/\) S /);

    // Meanwhile the same helper starts and relays other steps…
    const echo = launcher.launch(request('sh', ['-c', 'seq 1 50000 | tail -n 1; exit 4']));
    let echoed = '';
    echo.on('stdout', (chunk: Buffer) => {
      echoed += chunk.toString();
    });
    const echoExit = new Promise<number | null>((resolve) => echo.once('exit', (code) => resolve(code)));
    const echoClosed = new Promise<void>((resolve) => echo.once('close', resolve));
    expect(await echoExit).toBe(4);
    await echoClosed;
    expect(echoed).toBe('50000\n');
    // …and a terminal.
    const tty = launcher.launch({
      ...request('/bin/sh'),
      env: { PATH: '/usr/bin:/bin', TERM: 'xterm', PS1: '$ ' },
      terminal: { cols: 80, rows: 24 },
    });
    let screen = '';
    tty.on('stdout', (chunk: Buffer) => {
      screen += chunk.toString();
    });
    await spawned(tty);
    tty.writeInput(Buffer.from('echo $((6*7))\n'));
    await vi.waitUntil(() => screen.includes('42'), { timeout: 10_000 });
    tty.writeInput(Buffer.from('exit\n'));
    expect(received).toBe(atPause);

    yes.resumeOutput();
    await vi.waitUntil(() => received > atPause + 1_000_000, { timeout: 10_000 });
    yes.closeOutput();
  });

  it('pausing and resuming a child that already ended is harmless', async () => {
    const launcher = newSpawner();
    const proc = launcher.launch(request('true'));
    const closed = new Promise<void>((resolve) => proc.once('close', resolve));
    await closed;
    proc.pauseOutput();
    proc.resumeOutput();
    // The helper still answers: the frames for a forgotten child were ignored, not fatal.
    expect(await launcher.ready(5_000)).toBe(true);
  });
});

/**
 * A run step whose gate holds (the log archive is at its high water mark) until `open()`:
 * what the archive-on agent loop gives a step, without Redis.
 */
function heldContext(): {
  ctx: StepContext;
  lines: string[];
  open(): void;
  dropped: () => number;
} {
  const recording = recordingContext(dir);
  const lines: string[] = [];
  let open = false;
  let dropped = 0;
  let waiting: (() => void)[] = [];
  const ctx: StepContext = {
    ...recording.ctx,
    onLine: (_stream, line) => lines.push(line),
    acceptingLines: () => open || lines.length < 1000,
    onDroppedLine: () => {
      dropped += 1;
    },
    holdingLines: () => true,
    whenAccepting: (callback) => {
      if (open) queueMicrotask(callback);
      else waiting.push(callback);
    },
  };
  return {
    ctx,
    lines,
    open() {
      open = true;
      const callbacks = waiting;
      waiting = [];
      for (const callback of callbacks) callback();
    },
    dropped: () => dropped,
  };
}

describe.each([
  ['spawner', () => newSpawner()],
  ['node', () => new NodeLauncher()],
])('a run step whose output is held (%s launcher)', (_name, makeLauncher) => {
  it('loses nothing when the child exits with its output held (in the agent and in the pipe), past the drain time', async () => {
    const launcher = makeLauncher();
    // ~39 KB, of which the agent takes 1,000 lines and holds the rest of what it read (then pauses
    // the child), then 28,001 bytes, then the exit. Whatever the agent's reads were (one 39 KB
    // chunk, or 4 KB ones on a loaded machine), all that is left fits the 64 KiB pipe, so the
    // child always exits with its output unread: up to ~63 KB, split between the agent and the pipe.
    const step = RunStepSchema.parse({
      schemaVersion: 1,
      stepId: 'held',
      kind: 'run',
      command: 'seq 1 8000; sleep 0.5; seq 8001 13000; exit 0',
      shell: true,
      timeoutSeconds: 60,
    });
    const held = heldContext();
    let exitedAt = 0;
    const wrapped: ProcessLauncher = {
      name: launcher.name,
      close: () => launcher.close(),
      launch: (r) => {
        const proc = launcher.launch(r);
        proc.once('exit', () => {
          exitedAt = Date.now();
        });
        return proc;
      },
    };
    const outcome = runStep(step, held.ctx, { launcher: wrapped, drainAfterExitMs: 200 });
    await vi.waitUntil(() => exitedAt > 0, { timeout: 10_000 });
    expect(held.lines.length).toBe(1000);
    // Held well past drainAfterExitMs: the drain clock must not run while the output waits.
    await sleep(1500);
    expect(held.lines.length).toBe(1000);
    held.open();
    expect(await outcome).toMatchObject({ exitCode: 0, timedOut: false });
    expect(held.dropped()).toBe(0);
    expect(held.lines.length).toBe(13000);
    expect(held.lines.every((line, i) => line === String(i + 1))).toBe(true);
  });

  it('a cancelled step stops waiting for room: what it held is counted as dropped', async () => {
    const launcher = makeLauncher();
    const step = RunStepSchema.parse({
      schemaVersion: 1,
      stepId: 'held-cancel',
      kind: 'run',
      command: 'seq',
      args: ['1', '100000'],
      timeoutSeconds: 60,
    });
    const held = heldContext();
    const recording = recordingContext(dir);
    const ctx: StepContext = { ...held.ctx, signal: recording.abort.signal };
    const outcome = runStep(step, ctx, { launcher });
    await vi.waitUntil(() => held.lines.length === 1000, { timeout: 10_000 });
    // A while for seq to print past the 1000 lines delivered: what it printed beyond them, still
    // held, is what the cancel must count as dropped.
    await sleep(200);
    recording.abort.abort();
    const result = await outcome;
    expect(result).toMatchObject({ cancelled: true });
    // Every line seq printed before it was killed is either kept or counted.
    expect(held.lines.length).toBe(1000);
    expect(held.dropped()).toBeGreaterThan(0);
  });
});
