import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { LineSplitter } from '../steps/line-splitter.js';
import { signalProcessGroup } from '../steps/process-group.js';
import type { OutputStream } from '../steps/step-context.js';
import type { CellEnd, Kernel, KernelSink } from './kernel.js';

/**
 * The bash kernel: one persistent `bash` (variables, functions and the working directory stay),
 * written to as the shell sessions are (steps/shell-sessions.ts): each cell in a brace group with
 * stdin from /dev/null, then a marker line on stdout carrying `$?` and one on stderr. Unlike a
 * shell session, an interrupt keeps the shell: it traps SIGINT (so the signal ends the cell's
 * foreground program, and the shell goes on to the markers), and only a cell that ignores it
 * costs the kernel. A non-zero status is the cell's error, as an exception is in Python.
 */
export class BashKernel implements Kernel {
  private child: ChildProcess | undefined;
  private listener: ((stream: OutputStream, line: string) => void) | undefined;
  private onExit: ((detail: string) => void) | undefined;
  private exited = false;

  constructor(
    private readonly cwd: string,
    private readonly env: Record<string, string>,
  ) {}

  get alive(): boolean {
    return this.child !== undefined && !this.exited;
  }

  start(): Promise<string | undefined> {
    const child = spawn('bash', ['--noprofile', '--norc'], {
      cwd: this.cwd,
      env: this.env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    return new Promise((resolve) => {
      child.once('error', (err: NodeJS.ErrnoException) => {
        this.exited = true;
        resolve(
          err.code === 'ENOENT'
            ? 'bash was not found in the sandbox: bash contexts need it'
            : `bash could not be started: ${err.message}`,
        );
      });
      child.once('spawn', () => {
        child.stdin?.on('error', () => {});
        child.stdin?.write("trap ':' INT\n");
        resolve(undefined);
      });
      child.once('exit', (code, signal) => {
        this.exited = true;
        this.onExit?.(`the kernel ended (${signal ? `killed by ${signal}` : `exit code ${code}`})`);
      });
      const lines = (stream: OutputStream) => new LineSplitter((line) => this.listener?.(stream, line));
      const stdout = lines('stdout');
      const stderr = lines('stderr');
      child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
      child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
    });
  }

  execute(code: string, sink: KernelSink): Promise<CellEnd> {
    if (!this.alive) return Promise.resolve({ kind: 'died', detail: 'the kernel had ended' });
    const mark = `__SANDSTREAM_${randomBytes(8).toString('hex')}__`;
    const markLine = new RegExp(`^(.*)${mark}(\\d*)$`);
    return new Promise<CellEnd>((resolve) => {
      let status = 0;
      let seen = 0;
      const finish = (end: CellEnd) => {
        this.listener = undefined;
        this.onExit = undefined;
        resolve(end);
      };
      this.onExit = (detail) => finish({ kind: 'died', detail });
      this.listener = (stream, line) => {
        const marked = markLine.exec(line);
        if (!marked) return sink.line(stream, line);
        // Output without a final newline ends on the marker's line: it is still the cell's.
        if (marked[1]) sink.line(stream, marked[1]);
        if (stream === 'stdout') status = Number(marked[2]);
        if (++seen < 2) return;
        finish({
          kind: 'done',
          error:
            status === 0
              ? null
              : { name: 'ExitCodeError', value: `exit status ${status}`, traceback: `exit status ${status}` },
        });
      };
      this.child?.stdin?.write(
        `{ ${code}\n} </dev/null\nprintf '%s%d\\n' '${mark}' "$?"\nprintf '%s\\n' '${mark}' >&2\n`,
      );
    });
  }

  interrupt(): void {
    // The whole group: the cell's foreground program dies of it, the shell runs its trap.
    if (this.alive && this.child?.pid !== undefined) signalProcessGroup(this.child.pid, 'SIGINT');
  }

  kill(): void {
    if (this.child?.pid !== undefined && !this.exited) signalProcessGroup(this.child.pid, 'SIGKILL');
  }
}
