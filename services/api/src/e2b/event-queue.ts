/**
 * The messages of a server stream, pushed by callbacks (a command's output hooks, a watch's
 * events) and read by the plugin as an async iterable: in the order they were pushed, a
 * keepalive message while quiet, then the end (normal, or the error the stream ends with).
 * A pushed message may be a promise (a pid needs a Redis round trip first): later messages wait
 * for it, so output never passes its start event.
 */
export class EventQueue<T> implements AsyncIterable<T> {
  private readonly items: Promise<T>[] = [];
  private ending: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private readonly keepalive: NodeJS.Timeout | undefined;

  constructor(options: { keepalive?: { everyMs: number; message: () => T } } = {}) {
    const { keepalive } = options;
    if (keepalive)
      this.keepalive = setInterval(() => {
        // Only when nothing waits to go out: a keepalive must not slip between queued events.
        if (this.items.length === 0) this.push(keepalive.message());
      }, keepalive.everyMs);
  }

  push(message: T | Promise<T>): void {
    if (this.ending) return;
    const item = Promise.resolve(message);
    // Read in order; a rejected one ends the stream with its error when its turn comes.
    item.catch(() => {});
    this.items.push(item);
    this.wake?.();
  }

  /** Ends the stream after what was pushed: normally, or with `error`. */
  end(error?: unknown): void {
    if (this.ending) return;
    this.ending = error === undefined ? Promise.resolve() : Promise.reject(error);
    this.ending.catch(() => {});
    clearInterval(this.keepalive);
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T> {
    try {
      for (;;) {
        const next = this.items.shift();
        if (next !== undefined) {
          yield await next;
          continue;
        }
        if (this.ending) {
          await this.ending;
          return;
        }
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
      }
    } finally {
      // The reader stopped (the caller went away, or an error): no more keepalives either.
      clearInterval(this.keepalive);
      this.ending ??= Promise.resolve();
    }
  }
}
