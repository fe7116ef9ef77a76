import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { SandboxSpecError } from '@sandstream/bus';
import {
  CommandCancelledError,
  type Sandbox,
  SandboxClosedError,
  SandboxConflictError,
  SandboxNotFoundError,
  SandstreamApiError,
  SandstreamOptionsError,
} from '@sandstream/client';
import { liveBackends, repoRoot, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

const redisUrl = testRedisUrl();
/** A client in a process of its own (test/helpers/process-follower.ts), run from TypeScript. */
const followerScript = `${repoRoot}test/helpers/process-follower.ts`;

import { type Transport, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Live sandboxes end to end: the four services as processes, driven only through the SDK as an
// AI agent's tool loop drives one; on the in-process backend, and on Docker (unmodified image,
// agent from the carrier) when an engine is there (always under CI).

async function until(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs = 30_000,
): Promise<void> {
  await vi.waitUntil(check, { timeout: timeoutMs, interval: 50 }).catch(() => {
    throw new Error(`timed out waiting for ${what}`);
  });
}

/**
 * The full tour runs in-process; Docker runs the tool loop and the abort, which exercise what
 * differs. Over HTTP (the API in front of the same services) the tour runs in-process: the
 * transport does not depend on the backend.
 */
const backends = liveBackends().map((backend) => ({ ...backend, full: backend.name === 'in-process' }));
const cases = [
  ...backends.map((backend) => ({ ...backend, transport: 'redis' as Transport })),
  ...backends
    .filter((backend) => backend.name === 'in-process')
    .map((backend) => ({ ...backend, transport: 'http' as Transport })),
];

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/**
 * A repository-like tree of about 200 MB of random bytes: 1,200 source files of 1–256 KiB under
 * nested directories, four 25 MiB blobs, an executable script, an empty file and directory, a
 * relative symlink. Returns its file bytes.
 */
function writeRepository(root: string): number {
  let bytes = 0;
  const file = (path: string, data: Buffer | string, mode = 0o644) => {
    writeFileSync(path, data, { mode });
    chmodSync(path, mode); // past the umask
    bytes += data.length;
  };
  for (let i = 0; i < 1200; i++) {
    const dir = join(root, 'src', `pkg${i % 12}`, `mod${i % 5}`);
    mkdirSync(dir, { recursive: true });
    file(join(dir, `file${i}.ts`), randomBytes(1024 + ((i * 7919) % (255 * 1024))));
  }
  mkdirSync(join(root, 'assets'));
  for (let i = 0; i < 4; i++) file(join(root, 'assets', `blob${i}.bin`), randomBytes(25 * 1024 * 1024));
  mkdirSync(join(root, 'bin'));
  file(join(root, 'bin', 'build.sh'), '#!/bin/sh\necho built\n', 0o755);
  file(join(root, 'read-only.txt'), 'do not edit\n', 0o444);
  file(join(root, 'empty'), '');
  mkdirSync(join(root, 'empty-dir'));
  symlinkSync('src/pkg0/mod0/file0.ts', join(root, 'link-to-source'));
  return bytes;
}

/** Every entry under `root` by relative path: its kind and permission bits, and its sha256 or link target. */
function treeOf(root: string): Record<string, string> {
  const entries: Record<string, string> = {};
  const walk = (dir: string, prefix: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name);
      const rel = `${prefix}${name}`;
      const st = lstatSync(path);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) entries[rel] = `symlink -> ${readlinkSync(path)}`;
      else if (st.isDirectory()) {
        entries[rel] = `dir ${mode}`;
        walk(path, `${rel}/`);
      } else entries[rel] = `file ${mode} ${st.size} ${sha256(path)}`;
    }
  };
  walk(root, '');
  return entries;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Whether a process still runs inside the sandbox (its pid namespace, whatever the backend). */
async function aliveIn(sandbox: Sandbox, pid: number): Promise<boolean> {
  return (await sandbox.exec(['sh', '-c', 'kill -0 "$1" 2>/dev/null', 'sh', String(pid)])).exitCode === 0;
}

describe.each(cases)(
  'live sandboxes ($name backend, over $transport)',
  ({ image, env, full, name, transport }) => {
    let stack: Stack;
    let view: TransportView;
    beforeAll(async () => {
      stack = await startStack({
        label: name === 'docker' ? 'ldock' : transport === 'http' ? 'lhttp' : 'live',
        env: { SCHEDULER_GLOBAL_SLOTS: '16', SCHEDULER_TENANT_SLOTS: '16', ...env },
      });
      view = await viewThrough(stack, transport, redisUrl);
    });
    afterAll(async () => {
      await view?.stop();
      await stack?.stop();
    });
    const id = (name: string) => `${stack.namespace}-${name}`;

    it('drives a tool loop: write, run, parallel calls that do not wait for a long one, read back, close', async () => {
      // The workspace is the sandbox's own choice on Docker (the in-process backend keeps a directory of its own).
      const workingDirectory = name === 'docker' ? '/srv/app' : undefined;
      const sandbox = await view.client.sandboxes.create({
        id: id('loop'),
        image,
        labels: { purpose: 'loop' },
        ...(workingDirectory ? { workingDirectory } : {}),
      });
      expect(sandbox.id).toBe(id('loop'));
      if (workingDirectory) expect((await sandbox.exec(['pwd'])).stdout).toBe(`${workingDirectory}\n`);
      expect(await view.client.sandboxes.get(sandbox.id)).toMatchObject({
        state: 'ready',
        labels: { purpose: 'loop' },
      });

      expect(await sandbox.files.write('src/app.txt', 'alpha\nbeta\n')).toBe(11);
      const stats = await sandbox.stats();
      expect(stats).toMatchObject({ workspaceFiles: 1, workspaceBytes: 11, workspaceTruncated: false });
      expect(stats.commandsRun).toBe(workingDirectory ? 3 : 2);
      // Read from the cgroup the agent runs in (the container's own on Docker).
      expect(stats.memoryBytes).toBeGreaterThan(0);
      expect(stats.cpuSeconds).toBeGreaterThan(0);
      const cat = await sandbox.exec(['cat', 'src/app.txt']);
      expect(cat).toMatchObject({
        exitCode: 0,
        stdout: 'alpha\nbeta\n',
        stderr: '',
        timedOut: false,
        truncated: false,
      });

      // A long build and two reads at once: the reads answer while the build still runs.
      const started = Date.now();
      const build = sandbox.exec('echo building; sleep 30; echo never', { timeoutSeconds: 120 });
      const [first, second] = await Promise.all([
        sandbox.files.read('src/app.txt'),
        sandbox.files.grep('beta'),
      ]);
      expect(first).toBe('alpha\nbeta\n');
      expect(second.matches).toMatchObject([{ path: 'src/app.txt', line: 2, text: 'beta' }]);
      // The history records each result as the dispatcher takes it in: only the build stays open.
      await expect
        .poll(async () => (await sandbox.history()).filter((c) => c.result === undefined).map((c) => c.kind))
        .toEqual(['run']);
      expect(Date.now() - started).toBeLessThan(25_000);

      // A script written with its permission bits runs as it is.
      await sandbox.files.write('bin/hello.sh', '#!/bin/sh\necho ran\n', { mode: 0o755 });
      expect(await sandbox.exec(['./bin/hello.sh'])).toMatchObject({ exitCode: 0, stdout: 'ran\n' });

      const listed = await sandbox.files.list('src');
      expect(listed.entries.map((e) => e.path)).toEqual(['app.txt']);

      const closed = await sandbox.close();
      expect(closed).toMatchObject({ state: 'closed', reason: 'user' });
      // The build was killed with the sandbox; its follower learns the sandbox closed.
      await expect(build).rejects.toBeInstanceOf(SandboxClosedError);
      // Closing again is fine; a command on a closed sandbox is refused with a typed error.
      await sandbox.close();
      await expect(sandbox.exec(['true'])).rejects.toBeInstanceOf(SandboxClosedError);
    });

    it('keeps a long-lived shell: cd in one call, relative paths in the next (seeds/004)', async () => {
      await using sandbox = await view.client.sandboxes.create({ id: id('shell'), image });
      const shell = sandbox.shell();
      expect(
        await shell.run('cd /tmp && export A=1 && mkdir -p work && echo hi > work/note.txt'),
      ).toMatchObject({
        exitCode: 0,
      });
      expect(await shell.run('pwd; echo $A; cat work/note.txt')).toMatchObject({
        exitCode: 0,
        stdout: '/tmp\n1\nhi\n',
      });
      // Another session has its own state; a failing command reports its own code.
      expect(await sandbox.shell('other').run('pwd; exit_code() { return 4; }; exit_code')).toMatchObject({
        exitCode: 4,
      });
      expect((await shell.run('pwd')).stdout).toBe('/tmp\n');
    });

    it('copies a tree in and out as a tar stream with the same checksums', async () => {
      await using sandbox = await view.client.sandboxes.create({ id: id('cp'), image });
      const local = mkdtempSync(join(tmpdir(), 'sandstream-cp-'));
      try {
        const tree = join(local, 'repo');
        mkdirSync(join(tree, 'src', 'deep'), { recursive: true });
        // 3 MiB of random bytes: several chunks, and binary.
        writeFileSync(join(tree, 'blob.bin'), randomBytes(3 * 1024 * 1024));
        writeFileSync(join(tree, 'src', 'deep', 'a.txt'), 'alpha\n');
        const sent = await sandbox.files.upload(tree, '/tmp/in');
        expect(sent).toMatchObject({ files: 2 });
        expect(sent.bytes).toBeGreaterThan(3 * 1024 * 1024);
        // In-process, file steps are confined to the job's directory, where /tmp/in is tmp/in.
        const landed = name === 'in-process' ? 'tmp/in' : '/tmp/in';
        expect((await sandbox.exec(`cat ${landed}/repo/src/deep/a.txt`)).stdout).toBe('alpha\n');
        const back = join(local, 'back');
        await sandbox.files.downloadTo('/tmp/in/repo', back);
        expect(sha256(join(back, 'repo', 'blob.bin'))).toBe(sha256(join(tree, 'blob.bin')));
        expect(readFileSync(join(back, 'repo', 'src', 'deep', 'a.txt'), 'utf8')).toBe('alpha\n');
        // Past its limit a transfer is refused, naming the limit.
        await expect(sandbox.files.upload(tree, '/tmp/small', { maxBytes: 1024 * 1024 })).rejects.toThrow(
          /the transfer is [\d,]+ bytes, over.*1,048,576/,
        );
      } finally {
        rmSync(local, { recursive: true, force: true });
      }
    });

    // Over HTTP the same tar streams pass through the API; the 3 MiB copy above covers that path.
    it.runIf(full && transport === 'redis')(
      'a 200 MB repository goes in and comes back with the same checksums, modes and links',
      async () => {
        await using sandbox = await view.client.sandboxes.create({ id: id('repo'), image });
        const local = mkdtempSync(join(tmpdir(), 'sandstream-repo-'));
        try {
          const repo = join(local, 'repo');
          const bytes = writeRepository(repo);
          expect(bytes).toBeGreaterThan(200 * 1000 * 1000);
          const sent = await sandbox.files.upload(repo, 'in');
          expect(sent.files).toBe(Object.values(treeOf(repo)).filter((e) => e.startsWith('file')).length);
          expect(sent.bytes).toBeGreaterThan(bytes);
          const back = join(local, 'back');
          await sandbox.files.downloadTo('in/repo', back);
          expect(treeOf(join(back, 'repo'))).toEqual(treeOf(repo));
        } finally {
          rmSync(local, { recursive: true, force: true });
        }
      },
      120_000,
    );

    it.runIf(full)(
      'streams output through callbacks and an async iterator, and reports exit codes and stderr',
      async () => {
        await using sandbox = await view.client.sandboxes.create({ id: id('stream'), image });
        const seen: string[] = [];
        const result = await sandbox.exec('for i in 1 2 3; do echo out $i; done; echo oops >&2; exit 3', {
          onStdout: (line) => seen.push(line),
        });
        expect(seen).toEqual(['out 1', 'out 2', 'out 3']);
        expect(result).toMatchObject({ exitCode: 3, stdout: 'out 1\nout 2\nout 3\n', stderr: 'oops\n' });
        expect(result.commandId).toMatch(/^cmd-\d+$/);

        const items: string[] = [];
        for await (const item of sandbox.exec(['sh', '-c', 'echo a; echo b'])) {
          if (item.stream !== 'gap') items.push(`${item.stream}:${item.line}`);
        }
        expect(items).toEqual(['stdout:a', 'stdout:b']);

        const env = await sandbox.exec('echo $GREETING from $(pwd)', {
          env: { GREETING: 'hi' },
          cwd: '/tmp',
        });
        expect(env.stdout).toBe('hi from /tmp\n');
        expect(await sandbox.exec(['wc', '-l'], { stdin: 'one\ntwo\n' })).toMatchObject({ stdout: '2\n' });
        const bytes = await sandbox.exec(['od', '-An', '-tx1'], { stdin: new Uint8Array([0, 255]) });
        expect(bytes.stdout.trim()).toBe('00 ff');
        const timedOut = await sandbox.exec(['sleep', '30'], { timeoutSeconds: 1 });
        expect(timedOut).toMatchObject({ timedOut: true, cancelled: false });
        expect(timedOut.exitCode).not.toBe(0);
      },
    );

    it('an abort kills the command tree; another client reconnects and follows a running command', async () => {
      const sandbox = await view.client.sandboxes.create({ id: id('abort'), image });
      const controller = new AbortController();
      const pids: number[] = [];
      const tree = sandbox.exec('sleep 60 & echo $$ $!; wait', {
        signal: controller.signal,
        onStdout: (line) => pids.push(...line.split(' ').map(Number)),
      });
      await until('the tree printed its pids', () => pids.length === 2);
      for (const pid of pids) expect(await aliveIn(sandbox, pid)).toBe(true);
      controller.abort();
      const cancelled = await tree.then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(cancelled).toBeInstanceOf(CommandCancelledError);
      expect((cancelled as CommandCancelledError).result).toMatchObject({ cancelled: true });
      await until(
        'the tree is gone',
        async () =>
          !(await aliveIn(sandbox, pids[0] as number)) && !(await aliveIn(sandbox, pids[1] as number)),
      );

      // A second client (a worker that restarted mid-conversation) attaches to a running command.
      const slow = sandbox.exec('echo first; sleep 2; echo second');
      const other = view.newClient();
      try {
        const again = await other.sandboxes.connect(sandbox.id);
        // Found by what it runs (the aborted command before it may not be recorded as ended yet).
        const running = async (command: string) =>
          (await again.history()).find((c) => c.command === command && c.result === undefined)?.id;
        await expect.poll(() => running('echo first; sleep 2; echo second')).toBeDefined();
        const commandId = (await running('echo first; sleep 2; echo second')) as string;
        const followed = await again.attach(commandId);
        expect(followed).toMatchObject({ exitCode: 0, stdout: 'first\nsecond\n' });
        expect((await slow).commandId).toBe(commandId);
        // Any client cancels any command by id: here one the first client started.
        const long = sandbox.exec(['sleep', '60']);
        await expect.poll(() => running('sleep')).toBeDefined();
        const longId = (await running('sleep')) as string;
        await again.cancel(longId);
        expect(await long).toMatchObject({ commandId: longId, cancelled: true });
        await again.close();
      } finally {
        await other.close();
      }
    });

    it.runIf(full)(
      'runs a background server a command reaches; another client follows it; idle and close end it',
      async () => {
        const sandbox = await view.client.sandboxes.create({ id: id('bg'), image, idleTimeoutSeconds: 3 });
        const port = 20_000 + Math.floor(Math.random() * 20_000);
        const server = await sandbox.processes.start([
          process.execPath,
          '-e',
          `require('http').createServer((q, s) => s.end('hello from ' + process.pid)).listen(${port}, () => console.log('listening'))`,
        ]);
        await expect.poll(async () => (await sandbox.processes.list()).map((p) => p.id)).toEqual([server.id]);
        // Its output from any client: a second one attaches by id.
        const other = view.newClient();
        try {
          const lines: string[] = [];
          const following = (await other.sandboxes.connect(sandbox.id)).processes.follow(server.id, {
            onStdout: (line) => lines.push(line),
          });
          await expect.poll(() => lines).toEqual(['listening']);
          const reply = await sandbox.exec([
            process.execPath,
            '-e',
            `fetch('http://127.0.0.1:${port}').then((r) => r.text()).then(console.log)`,
          ]);
          expect(reply).toMatchObject({ exitCode: 0, stdout: expect.stringMatching(/^hello from \d+\n$/) });
          const pid = Number(reply.stdout.trim().split(' ').pop());
          // The server does not keep the sandbox open: it closes when idle, killing the server's tree.
          await expect
            .poll(async () => (await view.client.sandboxes.get(sandbox.id))?.state, {
              timeout: 60_000,
              interval: 200,
            })
            .toBe('closed');
          expect(await view.client.sandboxes.get(sandbox.id)).toMatchObject({ reason: 'idle' });
          await expect(following).rejects.toBeInstanceOf(SandboxClosedError);
          await expect.poll(() => isAlive(pid), { timeout: 30_000 }).toBe(false);
        } finally {
          await other.close();
        }
      },
    );

    it('follows a background process by id after the client that started it was killed -9: from its start, live, to its end', async () => {
      await using sandbox = await view.client.sandboxes.create({ id: id('reattach'), image });
      // It prints three lines, then waits for a file the test writes after reattaching.
      const script =
        'for i in 1 2 3; do echo early $i; done; until [ -e go ]; do sleep 0.1; done; echo late; exit 7';
      const first = spawn(`${repoRoot}node_modules/.bin/vite-node`, [followerScript, sandbox.id, script], {
        env: { ...process.env, ...view.clientEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        first.once('exit', (_, signal) => resolve(signal)),
      );
      const printed: string[] = [];
      let errors = '';
      first.stderr.on('data', (data: Buffer) => {
        errors += data.toString();
      });
      createInterface({ input: first.stdout }).on('line', (line) => printed.push(line));
      try {
        // That client follows the process in its own OS process, and is killed mid-follow.
        await until(
          `the first client follows the process (it printed ${JSON.stringify(printed)}, ${errors})`,
          () => printed.includes('stdout early 3'),
        );
        first.kill('SIGKILL');
        expect(await exited).toBe('SIGKILL');
      } finally {
        first.kill('SIGKILL');
      }
      expect(printed[0]).toMatch(/^id cmd-\d+$/);
      expect(printed.slice(1)).toEqual(['stdout early 1', 'stdout early 2', 'stdout early 3']);
      const processId = (printed[0] as string).replace(/^id /, '');
      // The process outlives its client; this client knows it by id only.
      expect((await sandbox.processes.list()).map((p) => p.id)).toEqual([processId]);
      const lines: string[] = [];
      const followed = sandbox.processes.get(processId).follow({ onStdout: (line) => lines.push(line) });
      let settled = false;
      followed.then(
        () => {
          settled = true;
        },
        () => {
          settled = true;
        },
      );
      // Its output from the start, then nothing more until it goes on: the follow is live.
      await expect.poll(() => lines).toEqual(['early 1', 'early 2', 'early 3']);
      expect(settled).toBe(false);
      await sandbox.exec(['touch', 'go']);
      expect(await followed).toMatchObject({ exitCode: 7, stdout: 'early 1\nearly 2\nearly 3\nlate\n' });
      expect(lines).toEqual(['early 1', 'early 2', 'early 3', 'late']);
    });

    it.runIf(full)(
      'kills a background process by id with the signal asked for; refuses an id taken by another tenant',
      async () => {
        await using sandbox = await view.client.sandboxes.create({ id: id('kill'), image });
        const proc = await sandbox.processes.start(
          "trap 'echo bye; exit 0' HUP; echo up; while :; do sleep 0.1; done",
        );
        const lines: string[] = [];
        const ended = proc.follow({ onStdout: (line) => lines.push(line) });
        await expect.poll(() => lines).toEqual(['up']);
        await proc.kill('SIGHUP');
        expect(await ended).toMatchObject({ cancelled: true, stdout: 'up\nbye\n' });
        // The list follows the dispatcher, which records the end a moment after the client saw it.
        await expect.poll(async () => (await sandbox.processes.list()).length).toBe(0);
        // Over HTTP the anonymous caller is tenant `default` and may not name another (403).
        await expect(
          view.client.sandboxes.create({ id: sandbox.id, image, tenant: 'someone-else' }),
        ).rejects.toBeInstanceOf(transport === 'redis' ? SandboxConflictError : SandstreamApiError);
        // The same request again is the same sandbox (a retried create).
        expect((await view.client.sandboxes.create({ id: sandbox.id, image })).id).toBe(sandbox.id);
      },
    );

    it.runIf(full)(
      'in-process, file steps stay inside the job directory; run steps are not confined',
      async () => {
        await using sandbox = await view.client.sandboxes.create({ id: id('confine'), image });
        const workspace = (await sandbox.exec(['pwd'])).stdout.trim();
        // An absolute path resolves inside the job directory, as in a chroot; `..` stops at it.
        expect(await sandbox.files.write('/etc/confined.txt', 'inside\n')).toBe(7);
        expect((await sandbox.exec(['cat', `${workspace}/etc/confined.txt`])).stdout).toBe('inside\n');
        expect(await sandbox.files.read('../../../etc/confined.txt')).toBe('inside\n');
        await expect(sandbox.files.read('/etc/hostname')).rejects.toThrow(/does not exist/);
        // A link out of the job directory is refused by name, for reads and writes alike.
        await sandbox.exec(['ln', '-s', '/etc', 'host-etc']);
        await expect(sandbox.files.read('host-etc/hostname')).rejects.toThrow(
          /leads out of the sandbox's directory/,
        );
        await expect(sandbox.files.write('host-etc/evil', 'x')).rejects.toThrow(/leads out/);
        // A run step is a process of this user: it reads the host's /etc (the backend is no boundary).
        expect((await sandbox.exec(['cat', '/etc/hostname'])).exitCode).toBe(0);
      },
    );

    it.runIf(full)(
      'closes an idle sandbox, but not while a command runs; closes at its lifetime',
      async () => {
        const idle = await view.client.sandboxes.create({ id: id('idle'), image, idleTimeoutSeconds: 2 });
        // A command longer than the idle limit keeps it open.
        expect(await idle.exec(['sleep', '4'])).toMatchObject({ exitCode: 0 });
        await until(
          'idle close',
          async () => (await view.client.sandboxes.get(idle.id))?.state === 'closed',
          60_000,
        );
        expect(await view.client.sandboxes.get(idle.id)).toMatchObject({ state: 'closed', reason: 'idle' });

        const short = await view.client.sandboxes.create({ id: id('life'), image, timeoutSeconds: 2 });
        await short.keepAlive();
        await until(
          'lifetime close',
          async () => (await view.client.sandboxes.get(short.id))?.state === 'closed',
          60_000,
        );
        expect(await view.client.sandboxes.get(short.id)).toMatchObject({
          state: 'closed',
          reason: 'lifetime',
        });
        await expect(short.keepAlive()).rejects.toBeInstanceOf(SandboxClosedError);
      },
    );

    it.runIf(full)(
      'refuses bad input by name and unknown sandboxes with typed errors; lists sandboxes by state and label',
      async () => {
        await expect(view.client.sandboxes.create({ image, idleTimeoutSecond: 5 } as never)).rejects.toThrow(
          /idleTimeoutSecond.*did you mean "idleTimeoutSeconds"/,
        );
        await expect(view.client.sandboxes.create({ image, steps: [] } as never)).rejects.toBeInstanceOf(
          SandboxSpecError,
        );
        await expect(view.client.sandboxes.connect(id('nobody'))).rejects.toBeInstanceOf(
          SandboxNotFoundError,
        );
        const a = await view.client.sandboxes.create({ id: id('list-a'), image, labels: { team: 'x' } });
        expect(() => a.exec(['true'], { timeout: 5 } as never)).toThrow(SandstreamOptionsError);
        const ready = await view.client.sandboxes.list({ state: 'ready', labels: { team: 'x' } });
        expect(ready.map((s) => s.id)).toEqual([a.id]);
        await a.close();
        const closed = await view.client.sandboxes.list({ state: 'closed', labels: { team: 'x' } });
        expect(closed.map((s) => s.id)).toEqual([a.id]);
      },
    );
  },
);
