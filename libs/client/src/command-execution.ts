import type { ExecItem, ExecResult } from './command-output.js';

/**
 * A running command: await it for its ExecResult, or iterate it for its output as it comes
 * (then await it, or read `result`, for the end). Starts on the next tick, so an iterator taken
 * right away sees every line.
 */
export class CommandExecution implements PromiseLike<ExecResult>, AsyncIterable<ExecItem> {
  private readonly items: ExecItem[] = [];
  private wake: (() => void) | undefined;
  private done = false;
  private iterating = false;
  readonly result: Promise<ExecResult>;

  constructor(run: (emit: (item: ExecItem) => void) => Promise<ExecResult>) {
    this.result = Promise.resolve()
      .then(() => run((item) => this.push(item)))
      .finally(() => {
        this.done = true;
        this.wake?.();
      });
    // Iterating without awaiting must not leave an unhandled rejection behind.
    this.result.catch(() => {});
  }

  // biome-ignore lint/suspicious/noThenProperty: a CommandExecution is awaited like the promise of its result
  then<A = ExecResult, B = never>(
    onFulfilled?: ((value: ExecResult) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.result.then(onFulfilled, onRejected);
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
