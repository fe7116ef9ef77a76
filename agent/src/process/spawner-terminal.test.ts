import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { childPids } from '@sandstream/test-support';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../logger.js';
import { builtSpawnerPath } from '../testing/agent-harness.js';
import type { StepProcess } from './launcher.js';
import { NodeLauncher } from './node-launcher.js';
import { SpawnerLauncher } from './spawner-launcher.js';

/** The native spawner's pseudo-terminals: a real pty, its size, its input, its line discipline. */
let dir: string;
let launcher: SpawnerLauncher;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-tty-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});
afterEach(() => launcher?.close());

/** The program a process runs now (empty once it has exited). */
const commandOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
};

/** sh on a 80x24 terminal, with everything it prints collected. */
function terminal(): {
  proc: StepProcess;
  screen: () => string;
  exit: Promise<number | null>;
  closed: Promise<void>;
} {
  launcher = new SpawnerLauncher(builtSpawnerPath(), createLogger({ verbose: false, write: () => {} }));
  const proc = launcher.launch({
    file: '/bin/sh',
    args: [],
    cwd: dir,
    env: { PATH: '/usr/bin:/bin', TERM: 'xterm', PS1: '$ ' },
    terminal: { cols: 80, rows: 24 },
  });
  let out = '';
  proc.on('stdout', (chunk) => {
    out += chunk.toString('utf8');
  });
  const exit = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const closed = new Promise<void>((resolve) => proc.once('close', resolve));
  return { proc, screen: () => out, exit, closed };
}

const type = (proc: StepProcess, text: string) => proc.writeInput(Buffer.from(text));

describe('terminals through the spawner', () => {
  it('runs the program on a terminal of the asked size, as its controlling terminal', async () => {
    const { proc, screen, exit, closed } = terminal();
    type(proc, 'stty size; tty; test -t 0 && echo "IS A TTY"; exit 3\n');
    expect(await exit).toBe(3);
    await closed;
    expect(screen()).toContain('24 80');
    expect(screen()).toMatch(/\/dev\/pts\/\d+/);
    expect(screen()).toContain('IS A TTY');
  });

  it('echoes input and tells the program of a new window size', async () => {
    const { proc, screen, exit } = terminal();
    proc.resize({ cols: 132, rows: 50 });
    type(proc, 'echo typed-$((6*7))\n');
    await vi.waitUntil(() => screen().includes('typed-42'), { timeout: 10_000 });
    // The echo of what was typed (the line discipline's) comes before the output.
    expect(screen()).toContain('echo typed-$((6*7))');
    type(proc, 'stty size\nexit\n');
    await exit;
    expect(screen()).toContain('50 132');
  });

  it('turns a Ctrl-C into SIGINT for the foreground command, and the shell goes on', async () => {
    const { proc, screen, exit } = terminal();
    // An interactive sh drops the rest of a list a Ctrl-C interrupted: the status is asked after.
    type(proc, 'sleep 100\n');
    // The sleep runs once the shell has started it: a child of the shell that has become `sleep`.
    await vi.waitUntil(() => screen().includes('sleep 100'), { timeout: 10_000 });
    await vi.waitUntil(() => childPids(proc.pid as number).some((pid) => commandOf(pid) === 'sleep'), {
      timeout: 10_000,
    });
    type(proc, '\x03');
    type(proc, 'echo "status=$?"\n');
    await vi.waitUntil(() => /status=130/.test(screen()), { timeout: 10_000 });
    type(proc, 'exit 0\n');
    expect(await exit).toBe(0);
  });

  it('reports the end of a program whose output was never read past its exit', async () => {
    const { proc, exit, closed } = terminal();
    type(proc, 'exit 7\n');
    expect(await exit).toBe(7);
    await closed;
  });

  it('is refused with a clear reason where only Node starts processes', () => {
    expect(() =>
      new NodeLauncher().launch({
        file: '/bin/sh',
        args: [],
        cwd: dir,
        env: {},
        terminal: { cols: 80, rows: 24 },
      }),
    ).toThrow(/terminal needs the sandstream-spawner helper/);
  });
});
