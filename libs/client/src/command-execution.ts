import type { ExecItem, ExecResult } from './command-output.js';

/**
 * A running command: a real Promise of its ExecResult (await it, `.then`, `.catch`, `.finally`,
 * `Promise.all` — `instanceof Promise` holds), and async-iterable for its output as it comes
 * (then await it, or read `result`, for the end). Starts on the next tick, so an iterator taken
 * right away sees every line.
 */
export class CommandExecution extends Promise<ExecResult> implements AsyncIterable<ExecItem> {
  /**
   * What `.then` / `.catch` / `.finally` derive is a plain Promise: a CommandExecution is made
   * only from a command, and Promise's machinery would call this constructor with an executor.
   */
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  private readonly items: ExecItem[] = [];
  private wake: (() => void) | undefined;
  private done = false;
  private iterating = false;
  readonly result: Promise<ExecResult>;

  constructor(run: (emit: (item: ExecItem) => void) => Promise<ExecResult>) {
    let settle: { resolve: (r: ExecResult) => void; reject: (e: unknown) => void } | undefined;
    super((resolve, reject) => {
      settle = { resolve, reject };
    });
    this.result = Promise.resolve()
      .then(() => run((item) => this.push(item)))
      .finally(() => {
        this.done = true;
        this.wake?.();
      });
    this.result.then(settle?.resolve, settle?.reject);
    // Iterating without awaiting must not leave an unhandled rejection behind.
    this.result.catch(() => {});
    super.catch(() => {});
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ExecItem> {
    this.iterating = true;
    for (;;) {
      const item = this.items.shift();
      if (item) {
        yield item;
        continue;
      }
      if (this.done) break;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      this.wake = undefined;
    }
    // A failed command ends its iteration with its error.
    await this.result;
  }

  private push(item: ExecItem): void {
    // Only an iterator consumes items: without one, nothing is buffered.
    if (!this.iterating) return;
    this.items.push(item);
    this.wake?.();
  }
}
