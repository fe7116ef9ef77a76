import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Limits, type RunStep, RunStepSchema } from '@sandstream/wire';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../logger.js';
import type { ProcessLauncher } from '../process/launcher.js';
import { NodeLauncher } from '../process/node-launcher.js';
import { SpawnerLauncher } from '../process/spawner-launcher.js';
import { isAlive as alive, builtSpawnerPath, waitDead } from '../testing/agent-harness.js';
import { recordingContext } from './recording-context.js';
import { type RunStepOptions, runStep as runStepWith } from './run-step.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'sandstream-run-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const step = (fields: Record<string, unknown>): RunStep =>
  RunStepSchema.parse({ schemaVersion: 1, stepId: 'run-test', kind: 'run', ...fields });

/**
 * Every behaviour below holds for both ways of starting a process: Node's child_process and the
 * native spawner the agent uses when it has one.
 */
const launchers: [string, () => ProcessLauncher][] = [
  ['node', () => new NodeLauncher()],
  [
    'spawner',
    () => new SpawnerLauncher(builtSpawnerPath(), createLogger({ verbose: false, write: () => {} })),
  ],
];

describe.each(launchers)('with the %s launcher', (_name, makeLauncher) => {
  let launcher: ProcessLauncher;
  beforeAll(() => {
    launcher = makeLauncher();
  });
  afterAll(() => launcher.close());
  const runStep = (s: RunStep, ctx: Parameters<typeof runStepWith>[1], options: RunStepOptions = {}) =>
    runStepWith(s, ctx, { ...options, launcher });

  describe('runStep: executing', () => {
    it('execs argv directly and streams stdout and stderr as separate lines', async () => {
      const r = recordingContext(dir);
      const outcome = await runStep(
        step({
          command: 'node',
          args: ['-e', 'console.log("out1");console.error("err1");console.log("out2")'],
        }),
        r.ctx,
      );
      expect(outcome).toEqual({ exitCode: 0, timedOut: false, errorMessage: null });
      expect(r.text('stdout')).toEqual(['out1', 'out2']);
      expect(r.text('stderr')).toEqual(['err1']);
    });

    it('passes arguments verbatim without a shell', async () => {
      const r = recordingContext(dir);
      await runStep(step({ command: 'printf', args: ['%s|', '$HOME', '; echo no', '*'] }), r.ctx);
      expect(r.text('stdout')).toEqual(['$HOME|; echo no|*|']);
    });

    it('runs through /bin/sh -c when shell is set, args as $1…', async () => {
      const r = recordingContext(dir);
      const outcome = await runStep(
        step({ command: 'echo "$0:$1-$2" | tr a-z A-Z', shell: true, args: ['a', 'b'] }),
        r.ctx,
      );
      expect(outcome.exitCode).toBe(0);
      expect(r.text('stdout')).toEqual(['SH:A-B']);
    });

    it('feeds stdin (text or base64) from a private file that is gone once the process has it', async () => {
      const r = recordingContext(dir);
      const outcome = await runStep(
        step({ command: 'sh', args: ['-c', 'wc -l; ls -l /proc/self/fd/0 >&2'], stdin: 'a\nb\nc\n' }),
        r.ctx,
      );
      expect(outcome.exitCode).toBe(0);
      expect(r.text('stdout').map((l) => l.trim())).toEqual(['3']);
      // Its fd 0 was the step's own file, removed once the process had it open.
      const input = /-> (\S*sandstream-stdin-[^/]+\/stdin)/.exec(r.text('stderr').join(''))?.[1];
      expect(input).toBeDefined();
      await vi.waitUntil(() => !existsSync(input as string), { timeout: 5000 });
      const binary = recordingContext(dir);
      await runStep(
        step({
          command: 'od',
          args: ['-An', '-tx1'],
          stdin: Buffer.from([0, 255, 10]).toString('base64'),
          stdinEncoding: 'base64',
        }),
        binary.ctx,
      );
      expect(binary.text('stdout').join('').trim()).toBe('00 ff 0a');
      // Without stdin the process reads /dev/null: at once, no input.
      const none = recordingContext(dir);
      await runStep(step({ command: 'wc', args: ['-c'] }), none.ctx);
      expect(none.text('stdout').map((l) => l.trim())).toEqual(['0']);
    });

    it('refuses stdin over its limit before starting anything', async () => {
      const r = recordingContext(dir);
      const outcome = await runStep(
        step({ command: 'cat', stdin: 'x'.repeat(Limits.runStdinMaxBytes + 1) }),
        r.ctx,
      );
      expect(outcome).toMatchObject({ errorCode: 'limit_exceeded', exitCode: null });
      expect(outcome.errorMessage).toMatch(/stdin/);
    });

    it('reports the exit code', async () => {
      const r = recordingContext(dir);
      expect((await runStep(step({ command: 'sh', args: ['-c', 'exit 7'] }), r.ctx)).exitCode).toBe(7);
    });

    it('reports death by signal as 128 + N and names the signal', async () => {
      const r = recordingContext(dir);
      const outcome = await runStep(step({ command: 'sh', args: ['-c', 'kill -SEGV $$'] }), r.ctx);
      expect(outcome.exitCode).toBe(139);
      expect(outcome.errorMessage).toMatch(/SIGSEGV/);
    });

    it('merges step.env over the agent environment', async () => {
      const r = recordingContext(dir);
      await runStep(
        step({ command: 'sh', args: ['-c', 'echo "$SANDSTREAM_T1 $PATH"'], env: { SANDSTREAM_T1: 'set' } }),
        r.ctx,
      );
      expect(r.text('stdout')).toEqual([`set ${process.env.PATH}`]);
    });

    it('resolves a relative workingDirectory against the base directory', async () => {
      await mkdir(path.join(dir, 'sub'), { recursive: true });
      const r = recordingContext(dir);
      await runStep(step({ command: 'pwd', workingDirectory: 'sub' }), r.ctx);
      expect(r.text('stdout')).toEqual([path.join(dir, 'sub')]);
    });

    it('answers a missing workingDirectory with an error naming it', async () => {
      const r = recordingContext(dir);
      const outcome = await runStep(step({ command: 'pwd', workingDirectory: 'nope/deeper' }), r.ctx);
      expect(outcome).toMatchObject({ errorCode: 'not_found', exitCode: null });
      expect(outcome.errorMessage).toContain(path.join(dir, 'nope/deeper'));
    });

    it('answers a workingDirectory that is a file with an error naming it', async () => {
      await writeFile(path.join(dir, 'plain-file'), 'x');
      const r = recordingContext(dir);
      const outcome = await runStep(step({ command: 'pwd', workingDirectory: 'plain-file' }), r.ctx);
      expect(outcome).toMatchObject({ errorCode: 'not_found', exitCode: null });
      expect(outcome.errorMessage).toBe(
        `workingDirectory ${path.join(dir, 'plain-file')} is not a directory`,
      );
    });

    it('answers a missing command in an existing workingDirectory as spawn_failed, not as the directory', async () => {
      await mkdir(path.join(dir, 'exists'), { recursive: true });
      const r = recordingContext(dir);
      const outcome = await runStep(
        step({ command: 'sandstream-no-such-command', workingDirectory: 'exists' }),
        r.ctx,
      );
      expect(outcome).toMatchObject({ errorCode: 'spawn_failed', exitCode: null });
      expect(outcome.errorMessage).toContain('sandstream-no-such-command');
    });

    it('completes as soon as the pipes close at exit, without waiting out the drain window', async () => {
      // A drain window far longer than any scheduling delay on a loaded machine: completing
      // anywhere near it would mean the executor waited for it instead of for the pipes.
      const r = recordingContext(dir);
      const started = Date.now();
      const outcome = await runStep(step({ command: 'sh', args: ['-c', 'echo done'] }), r.ctx, {
        drainAfterExitMs: 30_000,
      });
      expect(outcome.exitCode).toBe(0);
      expect(r.text('stdout')).toEqual(['done']);
      expect(Date.now() - started).toBeLessThan(10_000);
    });

    it('handles CRLF and a final line without a newline', async () => {
      const r = recordingContext(dir);
      await runStep(step({ command: 'printf', args: ['a\\r\\nb\\nc'] }), r.ctx);
      expect(r.text('stdout')).toEqual(['a', 'b', 'c']);
    });

    it('splits lines longer than the event line limit', async () => {
      const r = recordingContext(dir);
      const max = Limits.eventLineMaxBytes;
      await runStep(
        step({
          command: 'node',
          args: ['-e', `process.stdout.write("y".repeat(${max * 2 + 100}) + "\\nend")`],
        }),
        r.ctx,
      );
      expect(r.text('stdout').map((l) => l.length)).toEqual([max, max, 100, 3]);
    });

    it('never blocks a child that writes a lot quickly', async () => {
      let count = 0;
      const r = recordingContext(dir);
      const started = Date.now();
      const outcome = await runStep(
        step({ command: 'node', args: ['-e', 'for (let i = 0; i < 200000; i++) console.log("line " + i)'] }),
        { ...r.ctx, onLine: () => count++ },
      );
      expect(outcome.exitCode).toBe(0);
      expect(count).toBe(200_000);
      expect(Date.now() - started).toBeLessThan(20_000);
    });

    it('does not wait forever for a background child that keeps the pipes open, and ends it', async () => {
      const r = recordingContext(dir);
      const started = Date.now();
      const outcome = await runStep(step({ command: 'sh', args: ['-c', 'sleep 30 & echo $!'] }), r.ctx, {
        drainAfterExitMs: 200,
      });
      const elapsed = Date.now() - started;
      const pid = Number(r.text('stdout')[0]);
      try {
        expect(outcome.exitCode).toBe(0);
        // Waiting for the pipes to close would take the background child's 30 s.
        expect(elapsed).toBeLessThan(10_000);
        // A step leaves nothing running (a service that outlives its command is a background step).
        expect(await waitDead(pid, 5_000)).toBe(true);
      } finally {
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
    });

    describe('leaves no process behind, whatever it did to leave its group', () => {
      /**
       * A bounded fork bomb: `count` sleepers (no more; this machine is shared), each out of the
       * step's process group and session by `setsid`, half of them after a double fork (their
       * parent exits at once, so they are orphans), and half of each ignoring SIGTERM. Each appends
       * its pid to `pids` before it sleeps; the script waits until all are there.
       */
      const scatter = (count: number) => `
: > pids
for i in $(seq ${count / 4}); do
  setsid sh -c 'echo $$ >> pids; exec sleep 1000' &
  setsid sh -c 'trap "" TERM; echo $$ >> pids; exec sleep 1000' &
  (setsid sh -c 'echo $$ >> pids; exec sleep 1000' &)
  (setsid sh -c 'trap "" TERM; echo $$ >> pids; exec sleep 1000' &)
done
while [ "$(wc -l < pids)" -lt ${count} ]; do sleep 0.05; done
echo scattered
`;
      const COUNT = 48;
      let work: string;
      beforeAll(async () => {
        work = await mkdtemp(path.join(dir, 'scatter-'));
      });
      const pidsWritten = async () =>
        (await readFile(path.join(work, 'pids'), 'utf8').catch(() => ''))
          .split('\n')
          .filter(Boolean)
          .map(Number);
      /** Every pid written is gone (or a zombie not reaped yet); with the spawner, it has no child left. */
      const expectNothingLeft = async () => {
        const pids = await pidsWritten();
        expect(pids).toHaveLength(COUNT);
        try {
          expect(pids.filter(alive)).toEqual([]);
          if (launcher instanceof SpawnerLauncher) {
            const helper = launcher.helperPid as number;
            const children = await readFile(`/proc/${helper}/task/${helper}/children`, 'utf8');
            const live = children.split(' ').filter(Boolean).map(Number).filter(alive);
            expect(live).toEqual([]);
          }
        } finally {
          for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
        }
      };

      it('by its timeout', { timeout: 90_000 }, async () => {
        const r = recordingContext(work);
        const outcome = await runStep(
          step({ command: `${scatter(COUNT)}sleep 1000`, shell: true, timeoutSeconds: 15 }),
          r.ctx,
          { timeoutGraceMs: 300 },
        );
        expect(outcome).toMatchObject({ timedOut: true, errorCode: 'timed_out' });
        expect(r.text('stdout')).toEqual(['scattered']);
        await expectNothingLeft();
      });

      it('by a cancel', { timeout: 90_000 }, async () => {
        const r = recordingContext(work);
        const running = runStep(
          step({ command: `${scatter(COUNT)}sleep 1000`, shell: true, timeoutSeconds: 300 }),
          r.ctx,
        );
        await vi.waitUntil(() => r.text('stdout').includes('scattered'), { timeout: 60_000, interval: 50 });
        r.abort.abort();
        expect(await running).toMatchObject({ cancelled: true, errorCode: 'cancelled' });
        await expectNothingLeft();
      });

      it('when it ends by itself', { timeout: 90_000 }, async () => {
        const r = recordingContext(work);
        const outcome = await runStep(step({ command: scatter(COUNT), shell: true }), r.ctx, {
          drainAfterExitMs: 200,
        });
        expect(outcome).toMatchObject({ exitCode: 0, timedOut: false });
        await expectNothingLeft();
      });
    });
    it('runs the step in a session of its own, where job-control stops cannot freeze it', async () => {
      // Node's detached spawn calls setsid(); a group in the launcher's session would be
      // stopped by SIGTSTP and hang until the timeout killed it.
      const r = recordingContext(dir);
      const outcome = await runStep(
        step({
          command: 'sh',
          // Field 6 of /proc/<pid>/stat is the session id.
          args: ['-c', 'kill -TSTP $$; echo after; echo "$$ $(cut -d" " -f6 /proc/$$/stat)"'],
          timeoutSeconds: 5,
        }),
        r.ctx,
      );
      expect(outcome).toMatchObject({ exitCode: 0, timedOut: false });
      const [after, ids] = r.text('stdout');
      expect(after).toBe('after');
      const [pid, sid] = (ids ?? '').split(' ');
      expect(sid).toBe(pid);
    });

    it('runs a script without a #! line through /bin/sh, as execvp does', async () => {
      const script = path.join(dir, 'no-shebang.sh');
      await writeFile(script, 'echo "from sh: $1"\n');
      await chmod(script, 0o755);
      const r = recordingContext(dir);
      const outcome = await runStep(step({ command: script, args: ['x'] }), r.ctx);
      expect(outcome.exitCode).toBe(0);
      expect(r.text('stdout')).toEqual(['from sh: x']);
    });

    it("looks the command up on the PATH of the step's environment, relative entries from its directory", async () => {
      await mkdir(path.join(dir, 'tools', 'bin'), { recursive: true });
      const tool = path.join(dir, 'tools', 'bin', 'sandstream-test-tool');
      await writeFile(tool, '#!/bin/sh\necho tool ran\n');
      await chmod(tool, 0o755);
      for (const PATH of [path.join(dir, 'tools', 'bin'), 'bin:/usr/bin:/bin']) {
        const r = recordingContext(dir);
        const outcome = await runStep(
          step({ command: 'sandstream-test-tool', workingDirectory: 'tools', env: { PATH } }),
          r.ctx,
        );
        expect(outcome.exitCode).toBe(0);
        expect(r.text('stdout')).toEqual(['tool ran']);
      }
    });
  });

  describe('runStep: failures to start', () => {
    it('answers a missing command with spawn_failed naming it', async () => {
      const r = recordingContext(dir);
      const outcome = await runStep(step({ command: 'sandstream-no-such-command' }), r.ctx);
      expect(outcome).toMatchObject({ errorCode: 'spawn_failed', exitCode: null, timedOut: false });
      expect(outcome.errorMessage).toMatch(/"sandstream-no-such-command" not found on PATH/);
    });

    it('answers a non-executable file with spawn_failed', async () => {
      const file = path.join(dir, 'not-executable.sh');
      await writeFile(file, '#!/bin/sh\necho hi\n');
      await chmod(file, 0o644);
      const outcome = await runStep(step({ command: file }), recordingContext(dir).ctx);
      expect(outcome.errorCode).toBe('spawn_failed');
      expect(outcome.errorMessage).toMatch(/not-executable\.sh.*permission denied/);
    });

    it('answers an argument with a NUL byte with invalid_step instead of throwing', async () => {
      // The wire refuses it before a step reaches here; this is the executor's own guard.
      const nul = { ...step({ command: 'echo' }), args: ['a\u0000b'] };
      const outcome = await runStep(nul, recordingContext(dir).ctx);
      expect(outcome.errorCode).toBe('invalid_step');
      expect(outcome.errorMessage).toMatch(/"echo"/);
    });
  });

  describe('runStep: timeouts', () => {
    it('kills the whole process group, grandchildren included, and reports timed_out', async () => {
      const r = recordingContext(dir);
      const outcome = await runStep(
        step({ command: 'sh', args: ['-c', 'sleep 100 & echo $!; sleep 100'], timeoutSeconds: 0.5 }),
        r.ctx,
      );
      const grandchild = Number(r.text('stdout')[0]);
      expect(grandchild).toBeGreaterThan(0);
      expect(outcome).toMatchObject({ timedOut: true, errorCode: 'timed_out', exitCode: 143 });
      expect(outcome.errorMessage).toMatch(/timed out after 0.5 s/);
      expect(await waitDead(grandchild, 1000)).toBe(true);
    });

    it('escalates to SIGKILL for a group that ignores SIGTERM', async () => {
      const r = recordingContext(dir);
      const started = Date.now();
      const outcome = await runStep(
        step({
          command: 'sh',
          args: ['-c', 'trap "" TERM; sleep 100 & echo $!; sleep 100'],
          timeoutSeconds: 0.3,
        }),
        r.ctx,
        { timeoutGraceMs: 400 },
      );
      const grandchild = Number(r.text('stdout')[0]);
      expect(outcome).toMatchObject({ timedOut: true, errorCode: 'timed_out', exitCode: 137 });
      expect(outcome.errorMessage).toMatch(/SIGKILL after 400 ms/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(700);
      expect(await waitDead(grandchild, 1000)).toBe(true);
    });
  });

  describe('runStep: cancel', () => {
    it('kills a SIGTERM-ignoring tree within 1 s of abort and reports cancelled', async () => {
      const r = recordingContext(dir);
      const running = runStep(
        step({ command: 'sh', args: ['-c', 'trap "" TERM; sleep 100 & echo $!; sleep 100'] }),
        r.ctx,
      );
      while (r.text('stdout').length === 0) await new Promise((res) => setTimeout(res, 10));
      const grandchild = Number(r.text('stdout')[0]);
      const abortedAt = Date.now();
      r.abort.abort();
      const outcome = await running;
      const elapsed = Date.now() - abortedAt;
      expect(outcome).toMatchObject({
        cancelled: true,
        errorCode: 'cancelled',
        timedOut: false,
        exitCode: 137,
      });
      // SIGKILL after the 500 ms cancel grace; without it the tree would live its 100 s.
      expect(elapsed).toBeLessThan(10_000);
      expect(alive(grandchild)).toBe(false);
    });

    it('stops a well-behaved process right away', async () => {
      const r = recordingContext(dir);
      // A long grace: had SIGTERM not been enough, the step would wait all of it for the SIGKILL.
      const running = runStep(step({ command: 'sh', args: ['-c', 'echo go; sleep 100'] }), r.ctx, {
        cancelGraceMs: 30_000,
      });
      while (r.text('stdout').length === 0) await new Promise((res) => setTimeout(res, 10));
      const abortedAt = Date.now();
      r.abort.abort();
      const outcome = await running;
      expect(outcome).toMatchObject({ cancelled: true, errorCode: 'cancelled', exitCode: 143 });
      expect(Date.now() - abortedAt).toBeLessThan(10_000);
    });

    it('does not start a step whose signal is already aborted', async () => {
      const r = recordingContext(dir);
      r.abort.abort();
      const outcome = await runStep(
        step({ command: 'touch', args: [path.join(dir, 'should-not-exist')] }),
        r.ctx,
      );
      expect(outcome).toMatchObject({ errorCode: 'cancelled' });
      await expect(readFile(path.join(dir, 'should-not-exist'))).rejects.toThrow(/ENOENT/);
    });
  });
});
