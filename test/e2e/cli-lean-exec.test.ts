import { type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot, testRedisUrl } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// The lean `exec` (libs/client/src/cli/lean-exec, dist/bundle/sandstream-exec.cjs) against the
// full CLI (its start-up snapshot): each case runs both on the same sandbox and compares what
// they print and how they exit, including the forms the lean one hands to the full CLI.
const bundleDir = join(repoRoot, 'libs/client/dist/bundle');
const lean = join(bundleDir, 'sandstream-exec.cjs');
const blob = join(bundleDir, 'sandstream-cli.blob');
const bin = join(repoRoot, 'libs/client/bin/sandstream');

describe.runIf(existsSync(lean) && existsSync(blob))(
  'sandstream exec: lean path against the full CLI',
  () => {
    let stack: Stack;
    let id: string;
    let env: NodeJS.ProcessEnv;
    beforeAll(async () => {
      stack = await startStack({ label: 'leanexec' });
      env = { ...process.env, REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: stack.namespace };
      delete env.SANDSTREAM_URL;
      const sandbox = await stack.client.sandboxes.create({
        image: 'sandstream/busybox:static',
        env: { G: 'hi' },
      });
      id = sandbox.id;
    });
    afterAll(async () => {
      await stack?.stop();
    });

    const run = (how: 'lean' | 'full', args: string[], extra: NodeJS.ProcessEnv = {}, input?: string) =>
      spawnSync(
        process.execPath,
        how === 'lean' ? [lean, ...args] : ['--snapshot-blob', blob, '--', ...args],
        {
          env: { ...env, ...extra },
          encoding: 'utf8',
          timeout: 60_000,
          ...(input === undefined ? {} : { input }),
        },
      );
    const same = (args: string[], extra: NodeJS.ProcessEnv = {}, input?: string) => {
      const full = run('full', args, extra, input);
      const leanRun = run('lean', args, extra, input);
      const view = (r: SpawnSyncReturns<string>) => ({
        status: r.status,
        stdout: r.stdout,
        stderr: r.stderr,
      });
      expect(view(leanRun)).toEqual(view(full));
      return full;
    };

    it('output, stderr, exit code, env, --shell, --cwd, --timeout as the full CLI', () => {
      const echo = same(['exec', id, '--env', 'X=1', '--', 'sh', '-c', 'echo $G $X; echo err >&2; exit 7']);
      expect(echo).toMatchObject({ status: 7, stdout: 'hi 1\n', stderr: 'err\n' });
      expect(same(['exec', '--shell', '--cwd', '/tmp', id, '--', 'pwd && echo "a  b"']).stdout).toBe(
        '/tmp\na  b\n',
      );
      expect(same(['exec', id, '--', 'true']).status).toBe(0);
      expect(same(['exec', '--timeout', '1', id, '--', 'sleep', '30']).status).toBe(124);
      expect(same(['exec', id, '--', 'no-such-program-here']).status).toBe(125);
      expect(
        same(['exec', `--env=A=${'x'.repeat(3)}`, id, '--', 'sh', '-c', 'seq 1 2000']).stdout.split('\n')
          .length,
      ).toBe(2001);
    });

    it('not found, bad forms and what it hands to the full CLI end the same', () => {
      expect(same(['exec', 'no-such-sandbox', '--', 'true'])).toMatchObject({ status: 4 });
      // Forms the lean path does not take: usage errors, -i, a NUL byte, a bad timeout, no command.
      expect(same(['exec', id, '--', 'sort'], {}, 'b\na\n').stdout).toBe('');
      expect(same(['exec', '-i', id, '--', 'sort'], {}, 'b\na\n').stdout).toBe('a\nb\n');
      expect(same(['exec', '--timeout', '0', id, '--', 'true']).status).toBe(2);
      expect(same(['exec', '--env', 'NOEQUALS', id, '--', 'true']).status).toBe(2);
      expect(same(['exec', id, '--', 'echo', 'a\u0000b'.replace('\u0000', '')]).status).toBe(0);
      expect(same(['exec', id]).status).toBe(2);
      expect(same(['exec', '--json', id, '--', 'true']).status).toBe(2);
      expect(same(['exec', '--namespace', 'bad ns', id, '--', 'true']).status).not.toBe(0);
      // Redis that does not answer: the full CLI's message and code.
      const down = same(['exec', id, '--', 'true'], { REDIS_URL: 'redis://127.0.0.1:1' });
      expect(down.stderr).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
      // The HTTP API is the full CLI's.
      expect(same(['exec', id, '--', 'true'], { SANDSTREAM_URL: 'http://127.0.0.1:1' }).status).not.toBe(0);
    });

    it('Ctrl-C cancels the command in the sandbox and exits 130, as the full CLI', async () => {
      for (const how of ['full', 'lean'] as const) {
        const child = spawn(
          process.execPath,
          how === 'lean'
            ? [lean, 'exec', id, '--', 'sh', '-c', 'echo started; sleep 30']
            : ['--snapshot-blob', blob, '--', 'exec', id, '--', 'sh', '-c', 'echo started; sleep 30'],
          { env },
        );
        let stdout = '';
        let stderr = '';
        child.stderr.on('data', (c: Buffer) => {
          stderr += c.toString();
        });
        await new Promise<void>((resolve) =>
          child.stdout.on('data', (c: Buffer) => {
            stdout += c.toString();
            if (stdout.includes('started')) resolve();
          }),
        );
        const started = Date.now();
        child.kill('SIGINT');
        const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
        expect({ how, code, stdout, stderr }).toEqual({ how, code: 130, stdout: 'started\n', stderr: '' });
        expect(Date.now() - started).toBeLessThan(15_000);
      }
      // Nothing left running in the sandbox.
      const history = await stack.client.sandboxes.handle(id).history();
      const interrupted = history.filter((c) => c.args?.includes('echo started; sleep 30'));
      expect(interrupted.map((c) => c.result?.cancelled)).toEqual([true, true]);
    });

    it('compiled files changed since the build: the full CLI runs and says so; rewritten unchanged: the lean one', () => {
      const info = join(repoRoot, 'libs/client/dist/.tsbuildinfo');
      const before = readFileSync(info);
      const args = [lean, 'exec', id, '--', 'echo', 'ok'];
      try {
        // Same contents, a new time (a turbo cache restore): still fresh, no message.
        writeFileSync(info, before);
        const same = spawnSync(process.execPath, args, { env, encoding: 'utf8' });
        expect({ status: same.status, stdout: same.stdout, stderr: same.stderr }).toEqual({
          status: 0,
          stdout: 'ok\n',
          stderr: '',
        });
        writeFileSync(info, Buffer.concat([before, Buffer.from(' ')]));
        const changed = spawnSync(process.execPath, args, { env, encoding: 'utf8' });
        expect(changed.stdout).toBe('ok\n');
        expect(changed.stderr).toMatch(/start-up snapshot was built from other compiled files/);
      } finally {
        writeFileSync(info, before);
      }
    });

    it('bin/sandstream runs the lean path for exec, the snapshot for the rest', () => {
      // The lean bundle carries neither zod nor ioredis (what it defers to is a bundle of its own).
      const source = readFileSync(lean, 'utf8');
      expect(source).not.toMatch(/ZodError|ioredis/);
      const traced = spawnSync('sh', ['-x', bin, 'exec', id, '--', 'echo', 'ok'], { env, encoding: 'utf8' });
      expect(traced.stdout).toBe('ok\n');
      expect(traced.stderr).toContain('sandstream-exec.cjs exec');
      const other = spawnSync('sh', ['-x', bin, '--help'], { env, encoding: 'utf8' });
      expect(other.stderr).not.toContain('sandstream-exec.cjs');
      const overHttp = spawnSync('sh', ['-x', bin, 'exec', id, '--', 'true'], {
        env: { ...env, SANDSTREAM_URL: 'http://127.0.0.1:1' },
        encoding: 'utf8',
      });
      expect(overHttp.stderr).not.toContain('sandstream-exec.cjs exec');
    });
  },
);
