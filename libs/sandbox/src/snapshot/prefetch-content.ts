import type { CapturedEntry } from './snapshot-entry.js';

/** Entries looked at ahead of the one handed out. */
const MAX_AHEAD = 64;
/** Bytes of small files read ahead at most: what a capture adds to memory. */
const MAX_AHEAD_BYTES = 8 << 20;

interface Ahead {
  captured: CapturedEntry;
  data?: Promise<Buffer>;
  size: number;
}

/**
 * The same entries in the same order, small files (those with `readWhole`) read up to 64 entries
 * ahead, several at once, so the encoder does not wait on open, read and close of each in turn.
 * Ends only when every read it started has finished: a capture's freeze covers them all.
 */
export async function* prefetchContent(source: AsyncIterable<CapturedEntry>): AsyncGenerator<CapturedEntry> {
  const iterator = source[Symbol.asyncIterator]();
  const queue: Ahead[] = [];
  let bytes = 0;
  let ended = false;
  const fill = async () => {
    while (!ended && queue.length < MAX_AHEAD && bytes < MAX_AHEAD_BYTES) {
      const next = await iterator.next();
      if (next.done) {
        ended = true;
        return;
      }
      const captured = next.value;
      if (captured.readWhole) {
        const data = captured.readWhole();
        // Awaited when its turn comes (or in the cleanup below): never an unhandled rejection.
        data.catch(() => {});
        queue.push({ captured, data, size: captured.entry.size });
        bytes += captured.entry.size;
      } else {
        queue.push({ captured, size: 0 });
      }
    }
  };
  try {
    for (;;) {
      await fill();
      const head = queue.shift();
      if (!head) return;
      bytes -= head.size;
      if (!head.data) {
        yield head.captured;
        continue;
      }
      const data = await head.data;
      yield {
        entry: head.captured.entry,
        content: async function* () {
          yield data;
        },
      };
    }
  } finally {
    await Promise.allSettled(queue.map((a) => a.data));
    if (!ended) await iterator.return?.(undefined);
  }
}
