import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { ShellStep } from '@sandstream/wire';
import { findShell, noShellMessage } from './find-shell.js';
import { LineSplitter } from './line-splitter.js';
import { failed } from './outcome.js';
import { killProcessGroup, signalProcessGroup } from './process-group.js';
import { stepDirectory } from './resolve-path.js';
import type { OutputStream, StepContext, StepOutcome } from './step-context.js';

/** Long-lived shells one agent keeps at most (each is a process for the sandbox's lifetime). */
export const MAX_SHELL_SESSIONS = 16;

/** After a timeout or cancel: SIGTERM to the session's group, SIGKILL this much later. */
const KILL_GRACE_MS = 500;

/**
 * The long-lived shells of a sandbox (seeds/004), by name. A command is written into its
 * session's shell with its stdin from /dev/null (so it cannot swallow the commands after it), in
 * a brace group (so `cd`, `export` and functions stay for the next command), followed by a
 * marker line on stdout carrying `$?` and one on stderr; the command is over when both arrived.
 * Commands of one session run in the order sent; sessions run side by side.
 *
 * A command that times out or is cancelled takes the session down with it: the whole process
 * group (the shell and everything it started) is killed, the result says the session was
 * restarted, and the next command starts a fresh shell. That is the honest answer: a shell
 * cannot be told to drop a builtin loop, and its state cannot be rebuilt by replaying commands
 * (their side effects have happened).
 */
export class ShellSessions {
  private readonly sessions = new Map<string, ShellSession>();
  /** The shells are detached (own groups): they must not outlive the agent that leaves. */
  private readonly onExit = () => this.killAll();

  async run(step: ShellStep, ctx: StepContext): Promise<StepOutcome> {
    let session = this.sessions.get(step.session);
    if (!session) {
      if (this.sessions.size >= MAX_SHELL_SESSIONS) {
        return failed('limit_exceeded', `at most ${MAX_SHELL_SESSIONS} shell sessions per sandbox`);
      }
      session = new ShellSession(step.session, stepDirectory(ctx.baseDirectory, step.workingDirectory));
      if (this.sessions.size === 0) process.once('exit', this.onExit);
      this.sessions.set(step.session, session);
    }
    const current = session;
    const outcome = await current.run(step, ctx);
    if (current.ended && this.sessions.get(step.session) === current) {
      this.sessions.delete(step.session);
      if (this.sessions.size === 0) process.removeListener('exit', this.onExit);
    }
    return outcome;
  }

  /** Kills every session's process group (the agent is leaving). Synchronous: safe in 'exit'. */
  killAll(): void {
    for (const session of this.sessions.values()) session.kill();
    this.sessions.clear();
    process.removeListener('exit', this.onExit);
  }
}

class ShellSession {
  private child: ChildProcess | undefined;
  /** Commands of this session run one after another, in the order they arrived. */
  private queue: Promise<unknown> = Promise.resolve();
  private listener: ((stream: OutputStream, line: string) => void) | undefined;
  private exited: Promise<number | null> | undefined;
  ended = false;

  constructor(
    readonly name: string,
    private readonly cwd: string,
  ) {}

  run(step: ShellStep, ctx: StepContext): Promise<StepOutcome> {
    const next = this.queue.then(() => this.runNow(step, ctx));
    this.queue = next.catch(() => undefined);
    return next;
  }

  kill(): void {
    this.ended = true;
    if (this.child?.pid !== undefined) signalProcessGroup(this.child.pid, 'SIGKILL');
  }

  private async start(): Promise<StepOutcome | undefined> {
    const shell = await findShell();
    if (!shell) return failed('spawn_failed', noShellMessage('shell sessions'));
    const args = shell.endsWith('bash') ? ['--noprofile', '--norc'] : [];
    const child = spawn(shell, args, {
      cwd: this.cwd,
      env: { ...process.env },
      // Its own process group: a timeout or cancel ends the shell and all it started.
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const error = await new Promise<Error | undefined>((resolve) => {
      child.once('spawn', () => resolve(undefined));
      child.once('error', (err) => resolve(err));
    });
    if (error) {
      this.ended = true;
      return failed('spawn_failed', `the shell ${shell} could not be started: ${error.message}`);
    }
    child.stdin?.on('error', () => {});
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : null))),
    );
    const lines = (stream: OutputStream) => new LineSplitter((line) => this.listener?.(stream, line));
    const stdout = lines('stdout');
    const stderr = lines('stderr');
    child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
    this.child = child;
    return undefined;
  }

  private async runNow(step: ShellStep, ctx: StepContext): Promise<StepOutcome> {
    if (ctx.signal.aborted) return failed('cancelled', 'cancelled before it started');
    if (!this.child) {
      const refused = await this.start();
      if (refused) return refused;
    }
    const child = this.child as ChildProcess;
    const mark = `__SANDSTREAM_${randomBytes(8).toString('hex')}__`;
    const markLine = new RegExp(`^(.*)${mark}(\\d*)$`);
    let exitCode: number | null = null;
    let seen = 0;
    let stopping = false;
    return new Promise<StepOutcome>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const finish = (outcome: StepOutcome) => {
        clearTimeout(timer);
        ctx.signal.removeEventListener('abort', onAbort);
        this.listener = undefined;
        resolve(outcome);
      };
      this.listener = (stream, line) => {
        const marked = markLine.exec(line);
        if (!marked) {
          ctx.onLine(stream, line);
          return;
        }
        // Output without a final newline ends on the marker's line: it is still the command's.
        if (marked[1]) ctx.onLine(stream, marked[1]);
        if (stream === 'stdout') exitCode = Number(marked[2]);
        if (++seen === 2) finish({ exitCode, timedOut: false, errorMessage: null });
      };
      // The shell itself ended (the command ran `exit`, or it died): the session is over.
      void this.exited?.then((code) => {
        if (seen === 2 || stopping) return;
        this.ended = true;
        finish({
          exitCode: code,
          timedOut: false,
          errorMessage: `the shell session "${this.name}" ended (exit ${code}); the next command starts a new one`,
        });
      });
      const stop = (why: 'timeout' | 'cancel') => {
        if (seen === 2 || stopping) return;
        stopping = true;
        this.ended = true;
        const restarted = `the shell session "${this.name}" was killed with everything it ran and will start afresh (its working directory and environment are gone)`;
        void killProcessGroup(child.pid as number, { graceMs: KILL_GRACE_MS, settleMs: 200 }).finally(() =>
          finish(
            why === 'timeout'
              ? {
                  ...failed('timed_out', `timed out after ${step.timeoutSeconds} s; ${restarted}`),
                  exitCode: null,
                }
              : { ...failed('cancelled', `cancelled; ${restarted}`), cancelled: true },
          ),
        );
      };
      const onAbort = () => stop('cancel');
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      timer = setTimeout(() => stop('timeout'), step.timeoutSeconds * 1000);
      child.stdin?.write(
        `{ ${step.command}\n} </dev/null\nprintf '%s%d\\n' '${mark}' "$?"\nprintf '%s\\n' '${mark}' >&2\n`,
      );
    });
  }
}
