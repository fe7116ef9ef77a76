import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Terminal } from '@sandstream/client';
import { liveBackends, repoRoot, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Transport, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Terminals of live sandboxes (issue 15 §2): a PTY through the SDK on the in-process and Docker
// backends, and `sandstream shell` on a real terminal (tmux) and through a pipe.

const redisUrl = testRedisUrl();
const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');

/** Over HTTP (the API's WebSocket shell) on the in-process backend: the transport does not depend on it. */
const cases = [
  ...liveBackends().map((backend) => ({ ...backend, transport: 'redis' as Transport })),
  ...liveBackends()
    .filter((backend) => backend.name === 'in-process')
    .map((backend) => ({ ...backend, transport: 'http' as Transport })),
];

/** Everything the terminal prints, collected as it comes. */
function screen(terminal: Terminal, from: 'start' | 'now' = 'start') {
  let text = '';
  const done = (async () => {
    for await (const chunk of terminal.output({ from })) text += chunk.toString('utf8');
  })();
  return { text: () => text, done };
}

const shows = (view: { text: () => string }, pattern: RegExp | string, timeout = 20_000) =>
  vi.waitUntil(
    () => (typeof pattern === 'string' ? view.text().includes(pattern) : pattern.test(view.text())),
    {
      timeout,
      interval: 50,
    },
  );

describe.each(cases)('terminals ($name backend, over $transport)', ({ name, image, env, transport }) => {
  let stack: Stack;
  let through: TransportView;
  beforeAll(async () => {
    stack = await startStack({
      label: name === 'docker' ? 'tdock' : transport === 'http' ? 'ttyh' : 'tty',
      env,
    });
    through = await viewThrough(stack, transport, redisUrl);
  });
  afterAll(async () => {
    await through?.stop();
    await stack?.stop();
  });

  it('is a real terminal: echo, size, resize, Ctrl-C to the foreground command, exit code', async () => {
    const sandbox = await through.client.sandboxes.create({ id: `${stack.namespace}-t1`, image });
    const terminal = await sandbox.terminals.open({
      cols: 100,
      rows: 30,
      command: ['/bin/sh'],
      env: { PS1: '$ ' },
    });
    const view = screen(terminal);
    await terminal.write('stty size; tty; echo "six-times-$((6*7))"\n');
    await shows(view, 'six-times-42');
    expect(view.text()).toContain('30 100');
    expect(view.text()).toMatch(/\/dev\/pts\/\d+/);
    // The line discipline echoes what was typed, as a terminal does.
    expect(view.text()).toContain('echo "six-times-$((6*7))"');

    await terminal.resize(132, 50);
    await terminal.write('stty size\n');
    await shows(view, '50 132');

    // The command prints READY itself, so it is the foreground job when the Ctrl-C comes.
    await terminal.write("sh -c 'echo READY-$((1+1)); exec sleep 300'\n");
    await shows(view, 'READY-2');
    await terminal.write('\x03');
    await terminal.write('echo "status=$?"\n');
    await shows(view, 'status=130');

    // A second client attaches by id and sees the output from the start, then types into it.
    const other = through.newClient();
    try {
      const again = await (await other.sandboxes.connect(sandbox.id)).terminals.attach(terminal.id);
      const otherView = screen(again);
      await shows(otherView, 'six-times-42');
      await again.write('exit 5\n');
      await otherView.done;
    } finally {
      await other.close();
    }
    await view.done;
    expect(await terminal.wait()).toMatchObject({ exitCode: 5, cancelled: false, timedOut: false });
    // A terminal runs in the background: it does not show up as a running command.
    expect((await sandbox.info()).commandsRunning).toBe(0);
    await sandbox.close();
  });

  it('close hangs up the whole session: jobs in their own process groups too', async () => {
    const sandbox = await through.client.sandboxes.create({ id: `${stack.namespace}-t2`, image });
    // bash with job control puts each job in a process group of its own.
    const terminal = await sandbox.terminals.open();
    const view = screen(terminal);
    await terminal.write(
      'sleep 1000 & echo "JOB=$!"; trap "" HUP; nohup sleep 1001 >/dev/null 2>&1 & echo "NOHUP=$!"\n',
    );
    await shows(view, /NOHUP=\d+/);
    const job = Number(/JOB=(\d+)/.exec(view.text())?.[1]);
    const nohup = Number(/NOHUP=(\d+)/.exec(view.text())?.[1]);
    const alive = async (pid: number) =>
      (await sandbox.exec(['sh', '-c', 'kill -0 "$1" 2>/dev/null', 'sh', String(pid)])).exitCode === 0;
    expect(await alive(job)).toBe(true);
    expect(await alive(nohup)).toBe(true);
    const pgid = async (pid: number) =>
      (await sandbox.exec(['sh', '-c', 'cut -d" " -f5 /proc/$1/stat', 'sh', String(pid)])).stdout.trim();
    expect(await pgid(job)).not.toBe(await pgid(nohup));

    await terminal.kill();
    await view.done;
    const end = await terminal.wait();
    expect(end.cancelled).toBe(true);
    // The hangup, then SIGKILL for the job that ignores it: neither is left.
    await vi.waitUntil(async () => !(await alive(job)) && !(await alive(nohup)), {
      timeout: 20_000,
      interval: 200,
    });
    await sandbox.close();
  });

  it('refuses a bad size by field and limit, and a terminal the sandbox cannot start says why', async () => {
    const sandbox = await through.client.sandboxes.create({ id: `${stack.namespace}-t3`, image });
    await expect(sandbox.terminals.open({ cols: 5000 })).rejects.toThrow(/cols.*1000/);
    await expect(sandbox.terminals.open({ columns: 80 } as never)).rejects.toThrow(/did you mean "cols"/);
    const missing = await sandbox.terminals.open({ command: ['/no/such/program'] });
    const end = await missing.wait();
    expect(end.errorMessage).toMatch(/no\/such\/program/);
    const terminal = await sandbox.terminals.open({ command: ['/bin/sh'] });
    await expect(terminal.resize(0, 24)).rejects.toThrow(/cols must be an integer from 1 to 1000/);
    // The same terminal as a Node stream (what a web terminal or `pipe()` uses).
    const duplex = terminal.stream();
    let streamed = '';
    duplex.on('data', (chunk: Buffer) => {
      streamed += chunk.toString('utf8');
    });
    duplex.write('echo "via-stream-$((2*4))"\n');
    await vi.waitUntil(() => streamed.includes('via-stream-8'), { timeout: 20_000, interval: 50 });
    duplex.destroy();
    await terminal.kill();
    await sandbox.close();
  });
});

const hasTmux = spawnSync('tmux', ['-V']).status === 0;

describe.skipIf(!hasTmux && process.env.CI !== 'true')(
  'sandstream shell on a terminal (tmux) and through a pipe',
  () => {
    let stack: Stack;
    let dir: string;
    const socket = `sandstream-test-${process.pid}`;
    const tmux = (...args: string[]) => execFileSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
    const pane = (escapes = false) =>
      tmux('capture-pane', '-p', '-J', ...(escapes ? ['-e'] : []), '-t', 'main');
    // On a timeout, says what was awaited and what the pane showed (a bare waitUntil says neither).
    const paneShows = (pattern: RegExp | string, escapes = false) =>
      vi
        .waitUntil(
          () => {
            const text = pane(escapes);
            return typeof pattern === 'string' ? text.includes(pattern) : pattern.test(text);
          },
          { timeout: 30_000, interval: 100 },
        )
        .catch((err: Error) => {
          throw new Error(
            `${err.message}: the pane never showed ${String(pattern)}; it shows:\n${pane(escapes)}`,
          );
        });
    const keys = (...k: string[]) => tmux('send-keys', '-t', 'main', ...k);

    beforeAll(async () => {
      stack = await startStack({ label: 'ttycli' });
      dir = mkdtempSync(join(tmpdir(), 'sandstream-tty-cli-'));
    });
    afterAll(async () => {
      spawnSync('tmux', ['-L', socket, 'kill-server']);
      rmSync(dir, { recursive: true, force: true });
      await stack?.stop();
    });

    it('gives an interactive PTY: line editing, colours, a full-screen program, resize, Ctrl-C, exit code', async () => {
      const sandbox = await stack.client.sandboxes.create({
        id: `${stack.namespace}-cli`,
        image: 'debian:bookworm-slim',
      });
      // --redis-url and --namespace as flags: shell takes them like every command.
      const script = join(dir, 'shell.sh');
      writeFileSync(
        script,
        `#!/bin/sh\n'${process.execPath}' '${cliPath}' shell --redis-url '${redisUrl}' --namespace '${stack.namespace}' '${sandbox.id}'\necho "CLI-EXIT=$?"\nsleep 600\n`,
        { mode: 0o755 },
      );
      tmux('new-session', '-d', '-s', 'main', '-x', '100', '-y', '30', script);
      keys('export PS1="sbx$ "; echo "hi-$((40+2))"', 'Enter');
      await paneShows('hi-42');

      // Line editing happens in the sandbox's shell: a backspace and a cursor move.
      keys('echo abc', 'BSpace', 'd', 'Left', 'Left', 'X', 'Enter');
      await paneShows(/^aXbd$/m);

      // Colours reach the local terminal as escape sequences.
      keys("printf '\\033[31mRED\\033[0m\\n'", 'Enter');
      await paneShows('\u001b[31mRED', true);

      // The window size, then a resize of the local terminal.
      keys('stty size', 'Enter');
      await paneShows('30 100');
      tmux('resize-window', '-t', 'main', '-x', '120', '-y', '40');
      keys('clear; stty size', 'Enter');
      await paneShows('40 120');

      // A full-screen program: less on the alternate screen, then back.
      keys('seq 1 500 | less', 'Enter');
      await paneShows(/^1\n2\n3$/m);
      keys('G');
      await paneShows('500');
      keys('q');
      await paneShows(/sbx\$ $/m);

      // Ctrl-C reaches the foreground command, not the CLI.
      keys("sh -c 'echo READY-$((2+3)); exec sleep 300'", 'Enter');
      await paneShows('READY-5');
      keys('C-c');
      keys('echo "status=$?"', 'Enter');
      await paneShows('status=130');

      keys('exit 3', 'Enter');
      await paneShows('CLI-EXIT=3');
      await sandbox.close();
    });

    it('reads commands line by line from a pipe, and cp takes the connection flags too', async () => {
      const sandbox = await stack.client.sandboxes.create({
        id: `${stack.namespace}-pipe`,
        image: 'debian:bookworm-slim',
      });
      const flags = ['--redis-url', redisUrl, '--namespace', stack.namespace];
      const piped = spawnSync(process.execPath, [cliPath, 'shell', ...flags, sandbox.id], {
        input: 'cd /tmp\npwd\nexport A=7\necho "A=$A"\nexit\necho never\n',
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1', SANDSTREAM_NAMESPACE: 'elsewhere' },
      });
      expect(piped.stderr).toBe('');
      expect(piped.stdout).toBe('/tmp\nA=7\n');
      expect(piped.status).toBe(0);

      const file = join(dir, 'note.txt');
      writeFileSync(file, 'copied\n');
      const env = { ...process.env, REDIS_URL: 'redis://127.0.0.1:1', SANDSTREAM_NAMESPACE: 'elsewhere' };
      const up = spawnSync(process.execPath, [cliPath, 'cp', ...flags, file, `${sandbox.id}:note.txt`], {
        env,
        encoding: 'utf8',
      });
      expect(up.status, up.stderr).toBe(0);
      const down = join(dir, 'back');
      const back = spawnSync(process.execPath, [cliPath, 'cp', ...flags, `${sandbox.id}:note.txt`, down], {
        env,
        encoding: 'utf8',
      });
      expect(back.status, back.stderr).toBe(0);
      // docker cp's rule: a file copied to a path that does not exist becomes that file.
      expect(readFileSync(down, 'utf8')).toBe('copied\n');
      await sandbox.close();
    });
  },
);
