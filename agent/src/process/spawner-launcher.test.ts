import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { RunStepSchema } from '@sandstream/wire';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../logger.js';
import { recordingContext } from '../steps/recording-context.js';
import { runStep } from '../steps/run-step.js';
import { builtSpawnerPath, isAlive, waitDead } from '../testing/agent-harness.js';
import type { LaunchRequest, StepProcess } from './launcher.js';
import { SpawnerLauncher } from './spawner-launcher.js';

/**
 * What only the native spawner has to get right: the helper process itself dying, being closed,
 * reaping what steps leave behind, and keeping one step's trouble away from the others.
 */
let dir: string;
let logged: string[];
let launcher: SpawnerLauncher;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-spawner-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
const newLauncher = () => {
  logged = [];
  launcher = new SpawnerLauncher(
    builtSpawnerPath(),
    createLogger({ verbose: false, write: (line) => logged.push(line) }),
  );
  launcher.start();
  return launcher;
};
afterEach(() => launcher?.close());

const request = (file: string, args: string[] = []): LaunchRequest => ({
  file,
  args,
  cwd: dir,
  env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
});

/** Resolves with the process's pid once it runs. */
const spawned = (proc: StepProcess) =>
  new Promise<number>((resolve, reject) => {
    proc.once('spawn', () => resolve(proc.pid as number));
    proc.once('error', reject);
  });
const closed = (proc: StepProcess) => new Promise<void>((resolve) => proc.once('close', resolve));
const childrenOf = (pid: number) =>
  readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);

describe('SpawnerLauncher', () => {
  it('answers the readiness check when the helper runs', async () => {
    expect(await newLauncher().ready(5_000)).toBe(true);
  });

  it('fails the readiness check for a helper that exits, and kills one that stays silent', async () => {
    const exits = path.join(dir, 'exits');
    const silent = path.join(dir, 'silent');
    await writeFile(exits, '#!/bin/sh\nexit 3\n', { mode: 0o755 });
    await writeFile(silent, '#!/bin/sh\nexec sleep 30\n', { mode: 0o755 });
    const log = createLogger({ verbose: false, write: () => {} });
    const exiting = new SpawnerLauncher(exits, log);
    expect(await exiting.ready(5_000)).toBe(false);
    exiting.close();
    const quiet = new SpawnerLauncher(silent, log);
    quiet.start();
    const quietPid = quiet.helperPid as number;
    expect(isAlive(quietPid)).toBe(true);
    const started = Date.now();
    expect(await quiet.ready(300)).toBe(false);
    // The silent helper would sleep 30 s: ready() gave up on its own limit long before.
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await waitDead(quietPid, 2_000)).toBe(true);
    quiet.close();
  });

  it('fails a start as Node does: the file in the message, the errno as code', async () => {
    const proc = newLauncher().launch(request('sandstream-no-such-command', ['a']));
    const err = await new Promise<NodeJS.ErrnoException>((resolve) => proc.once('error', resolve));
    expect(err).toMatchObject({ code: 'ENOENT', path: 'sandstream-no-such-command', spawnargs: ['a'] });
    expect(err.message).toBe('spawn sandstream-no-such-command ENOENT');
  });

  it("names a signal by its first name (SIGABRT, not Node's alias SIGIOT)", async () => {
    const proc = newLauncher().launch(request('sh', ['-c', 'kill -ABRT $$']));
    const [code, signal] = await new Promise<[number | null, string | null]>((resolve) =>
      proc.once('exit', (c, s) => resolve([c, s])),
    );
    expect(code).toBeNull();
    expect(signal).toBe('SIGABRT');
  });

  it('delivers no output after closeOutput, as a destroyed stream would not', async () => {
    const proc = newLauncher().launch(request('sh', ['-c', 'while :; do echo x; done']));
    const ended = closed(proc);
    const pid = await spawned(proc);
    await new Promise<void>((resolve) => proc.once('stdout', () => resolve()));
    proc.closeOutput();
    let after = 0;
    proc.on('stdout', () => after++);
    // The writer dies of SIGPIPE once the helper has closed its end of the pipes: its end is the
    // event after which no output can come. Should it survive (SIGPIPE ignored), kill it after a
    // window long enough for many more writes.
    let timer: NodeJS.Timeout | undefined;
    const survived = await Promise.race([
      ended.then(() => false),
      new Promise<boolean>((r) => {
        timer = setTimeout(() => r(true), 5_000);
      }),
    ]);
    clearTimeout(timer);
    if (survived) {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {}
    }
    await ended;
    expect(after).toBe(0);
  });

  it('keeps watching other processes when one step listener throws', async () => {
    const l = newLauncher();
    const noisy = l.launch(request('echo', ['boom']));
    noisy.on('stdout', () => {
      throw new Error('listener bug');
    });
    await closed(noisy);
    const next = l.launch(request('echo', ['still here']));
    const out: string[] = [];
    next.on('stdout', (chunk) => out.push(chunk.toString()));
    await closed(next);
    expect(out.join('')).toBe('still here\n');
    expect(logged.join('')).toMatch(/a run step listener threw.*listener bug/);
  });

  it('reaps what a step leaves behind instead of leaving zombies', async () => {
    const l = newLauncher();
    const helperPid = l.helperPid as number;
    // The shell exits at once; its background sleep is re-parented to the helper (subreaper).
    const proc = l.launch(request('sh', ['-c', 'sleep 0.3 >/dev/null 2>&1 & echo $!']));
    const out: string[] = [];
    proc.on('stdout', (chunk) => out.push(chunk.toString()));
    await closed(proc);
    const orphan = Number(out.join('').trim());
    expect(childrenOf(helperPid)).toContain(orphan);
    expect(await waitDead(orphan, 5_000)).toBe(true);
    // Dead and reaped: not even a zombie entry is left (a zombie never leaves by itself).
    await expect.poll(() => childrenOf(helperPid), { timeout: 5_000 }).not.toContain(orphan);
  });

  it('kills running steps when the agent closes it (or dies), since nobody is left to report them', async () => {
    const l = newLauncher();
    const pid = await spawned(l.launch(request('sleep', ['30'])));
    l.close();
    expect(await waitDead(pid, 5_000)).toBe(true);
  });

  it('ends a step whose helper was killed with an error, kills the step, and starts a new helper', async () => {
    const l = newLauncher();
    const first = l.helperPid as number;
    const r = recordingContext(dir);
    const step = RunStepSchema.parse({
      schemaVersion: 1,
      stepId: 'lost',
      kind: 'run',
      command: 'sh',
      args: ['-c', 'echo $$; exec sleep 30'],
    });
    const outcome = runStep(step, r.ctx, { launcher: l });
    while (r.text('stdout').length === 0) await new Promise((res) => setTimeout(res, 10));
    const stepPid = Number(r.text('stdout')[0]);
    process.kill(first, 'SIGKILL');
    expect(await outcome).toMatchObject({ errorCode: 'internal', exitCode: null });
    expect((await outcome).errorMessage).toMatch(/spawner helper .*its process group was killed/);
    expect(await waitDead(stepPid, 5_000)).toBe(true);

    const again = l.launch(request('echo', ['after']));
    await closed(again);
    expect(l.helperPid).toBeDefined();
    expect(l.helperPid).not.toBe(first);
    expect(isAlive(first)).toBe(false);
  });
});
