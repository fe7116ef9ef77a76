import { spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { closeSync, openSync } from 'node:fs';
import type { LaunchRequest, ProcessLauncher, StepProcess, StepProcessEvents } from './launcher.js';

/**
 * Node's own child_process: the fallback when the native spawner is not there (an agent run from
 * a checkout that was not built with a C compiler, `--spawner none`). It forks the agent, which
 * costs about a millisecond more per step for a process of the agent's size (docs/benchmarks.md).
 */
export class NodeLauncher implements ProcessLauncher {
  readonly name = 'node';

  launch(request: LaunchRequest): StepProcess {
    if (request.terminal) {
      throw new TerminalUnsupportedError(
        'a terminal needs the sandstream-spawner helper, which this agent runs without (--spawner none, or no helper built for it)',
      );
    }
    // Throws synchronously for what Node validates up front (NUL bytes, some bad cwds).
    // The step's stdin file is opened here and handed over as the child's fd 0, then closed.
    const stdin = request.stdinPath === undefined ? 'ignore' : openSync(request.stdinPath, 'r');
    try {
      const child = spawn(request.file, request.args, {
        cwd: request.cwd,
        env: request.env,
        // Own process group: timeouts and cancels signal -pid and reach every descendant.
        detached: true,
        stdio: [stdin, 'pipe', 'pipe'],
      });
      return new NodeStepProcess(child);
    } finally {
      if (typeof stdin === 'number') closeSync(stdin);
    }
  }

  close(): void {}
}

/** A terminal asked of a launcher that cannot give one. */
export class TerminalUnsupportedError extends Error {
  readonly code = 'ENOTTY';
}

class NodeStepProcess extends EventEmitter<StepProcessEvents> implements StepProcess {
  constructor(private readonly child: ReturnType<typeof spawn>) {
    super();
    child.stdout?.on('data', (chunk: Buffer) => this.emit('stdout', chunk));
    child.stderr?.on('data', (chunk: Buffer) => this.emit('stderr', chunk));
    child.once('spawn', () => this.emit('spawn'));
    child.once('error', (err: NodeJS.ErrnoException) => {
      // After 'spawn' only a failed kill raises 'error', and run steps signal the group themselves.
      if (child.pid === undefined) this.emit('error', err);
    });
    child.once('exit', (code, signal) => this.emit('exit', code, signal));
    child.once('close', () => this.emit('close'));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Node's child_process makes no subreaper: orphans go to the system's init. */
  readonly reaper = undefined;

  closeOutput(): void {
    this.child.stdout?.destroy();
    this.child.stderr?.destroy();
  }

  pauseOutput(): void {
    // A paused Readable stops calling read() on the pipe once its buffer is full (~64 KiB).
    this.child.stdout?.pause();
    this.child.stderr?.pause();
  }

  resumeOutput(): void {
    this.child.stdout?.resume();
    this.child.stderr?.resume();
  }

  writeInput(): void {}

  resize(): void {}
}
