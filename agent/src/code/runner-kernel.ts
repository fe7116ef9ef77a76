import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { LineSplitter } from '../steps/line-splitter.js';
import { signalProcessGroup } from '../steps/process-group.js';
import type { OutputStream } from '../steps/step-context.js';
import type { CellEnd, Kernel, KernelSink } from './kernel.js';
import { parseRunnerMessage } from './runner-message.js';

export interface RunnerCommand {
  /** The program (python3, node) and its arguments (the runner's source with -c / -e). */
  file: string;
  args: string[];
  /** What the refusal says when the program is missing ("python3 (the python template has it)"). */
  what: string;
  cwd: string;
  env: Record<string, string>;
}

interface Pending {
  id: number;
  sink: KernelSink;
  resolve: (end: CellEnd) => void;
}

/**
 * A kernel that is a runner script speaking JSON lines: cells go out on its fd 3, messages come
 * back on its fd 4. Its stdin is /dev/null (a cell reading input gets end of file, never a cell
 * meant for the kernel), and fds 1 and 2 stay the process's own, forwarded line by line, so a
 * subprocess's output reaches the caller too. It leads its own process group: a kill takes
 * everything the cells started with it.
 */
export class RunnerKernel implements Kernel {
  private child: ChildProcess | undefined;
  private requests: Writable | undefined;
  private pending: Pending | undefined;
  private nextId = 1;
  private exited = false;
  private exitDetail = '';

  constructor(private readonly command: RunnerCommand) {}

  get alive(): boolean {
    return this.child !== undefined && !this.exited;
  }

  start(): Promise<string | undefined> {
    const { file, args, cwd, env, what } = this.command;
    const child = spawn(file, args, {
      cwd,
      env,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
    });
    this.child = child;
    return new Promise((resolve) => {
      let started = false;
      child.once('error', (err: NodeJS.ErrnoException) => {
        this.exited = true;
        if (started) return;
        started = true;
        resolve(
          err.code === 'ENOENT'
            ? `${what} was not found in the sandbox: the code interpreter needs it`
            : `${what} could not be started: ${err.message}`,
        );
      });
      child.once('exit', (code, signal) => {
        this.exited = true;
        this.exitDetail = signal ? `killed by ${signal}` : `exit code ${code}`;
        const pending = this.pending;
        this.pending = undefined;
        pending?.resolve({ kind: 'died', detail: `the kernel ended (${this.exitDetail})` });
        if (!started) {
          started = true;
          resolve(
            `${what} ended before its kernel was ready (${this.exitDetail}): ${startupErrors.join('\n').slice(-2000)}`,
          );
        }
      });
      // What the program says before it is ready (a Python too old for the runner, say).
      const startupErrors: string[] = [];
      const forward = (stream: OutputStream) =>
        new LineSplitter((line) => {
          if (!started) startupErrors.push(line);
          this.pending?.sink.line(stream, line);
        });
      const stdout = forward('stdout');
      const stderr = forward('stderr');
      child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
      child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
      child.stdout?.on('end', () => stdout.end());
      child.stderr?.on('end', () => stderr.end());
      this.requests = child.stdio[3] as Writable;
      this.requests.on('error', () => {});
      const replies = child.stdio[4] as Readable;
      replies.on('error', () => {});
      createInterface({ input: replies, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) => {
        const message = parseRunnerMessage(line);
        if (!message) return;
        if (message.type === 'ready') {
          if (!started) {
            started = true;
            resolve(undefined);
          }
          return;
        }
        const pending = this.pending;
        if (!pending || message.id !== pending.id) return;
        if (message.type === 'stream') pending.sink.text(message.name, message.text);
        else if (message.type === 'result') {
          const { type: _type, id: _id, ...result } = message;
          pending.sink.result(result);
        } else {
          // A subprocess's output written before the cell ended may be readable on fds 1 and 2
          // in this same turn of the event loop: let it reach the cell first.
          this.pending = { ...pending, resolve: () => {} };
          setImmediate(() => {
            if (this.pending?.id === pending.id) this.pending = undefined;
            pending.resolve({ kind: 'done', error: message.error });
          });
        }
      });
    });
  }

  execute(code: string, sink: KernelSink): Promise<CellEnd> {
    if (!this.alive || !this.requests) {
      return Promise.resolve({ kind: 'died', detail: `the kernel had ended (${this.exitDetail})` });
    }
    const id = this.nextId++;
    return new Promise<CellEnd>((resolve) => {
      this.pending = { id, sink, resolve };
      this.requests?.write(`${JSON.stringify({ id, code })}\n`);
    });
  }

  interrupt(): void {
    // The kernel process only (as Jupyter does): Python turns it into KeyboardInterrupt, which
    // also stops a subprocess the cell waits for; node breaks the running script.
    if (this.alive && this.child?.pid !== undefined) {
      try {
        process.kill(this.child.pid, 'SIGINT');
      } catch {
        // already gone: its exit ends the cell
      }
    }
  }

  kill(): void {
    if (this.child?.pid !== undefined && !this.exited) signalProcessGroup(this.child.pid, 'SIGKILL');
  }
}
