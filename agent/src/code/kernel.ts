import type { CodeError, CodeResult } from '@sandstream/wire';
import type { OutputStream } from '../steps/step-context.js';

/** Where a kernel delivers what the running cell produces. */
export interface KernelSink {
  /** Text the cell printed through the kernel (print, console.log): chunks, not lines, in order. */
  text(stream: OutputStream, text: string): void;
  /** A whole line written straight to the kernel's fd 1 or 2 (a subprocess, bash's output). */
  line(stream: OutputStream, line: string): void;
  result(result: CodeResult): void;
}

/** How a cell ended: it finished (raising or not), or its kernel went away under it. */
export type CellEnd = { kind: 'done'; error: CodeError | null } | { kind: 'died'; detail: string };

/**
 * One kernel of a context: a process inside the sandbox that keeps the context's state and runs
 * its cells one at a time.
 */
export interface Kernel {
  /** Starts the process; resolves with a message naming what failed, or undefined once it answers. */
  start(): Promise<string | undefined>;
  /** Runs one cell; resolves when it ended. One at a time (the context queues them). */
  execute(code: string, sink: KernelSink): Promise<CellEnd>;
  /** Asks the running cell to stop (SIGINT): the kernel and its state stay. */
  interrupt(): void;
  /** Kills the kernel and everything it started; a running cell ends as `died`. Synchronous. */
  kill(): void;
  readonly alive: boolean;
}
