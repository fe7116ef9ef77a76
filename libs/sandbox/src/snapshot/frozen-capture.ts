import type { FilesCapture } from '../backend.js';
import { encodeSnapshot } from './snapshot-codec.js';
import type { CapturedEntry } from './snapshot-entry.js';

/**
 * A capture that holds the sandbox frozen from `freeze` until its stream has been read to the end
 * (or failed): the thaw runs then, whatever happened, and `done` reports the frozen time.
 */
export async function frozenCapture(options: {
  freeze: () => Promise<() => Promise<void> | void>;
  entries: () => AsyncIterable<CapturedEntry>;
  parts: string[];
}): Promise<FilesCapture> {
  const started = performance.now();
  const thaw = await options.freeze();
  let count = 0;
  let resolveDone!: (value: { frozenMs: number; entries: number }) => void;
  let rejectDone!: (err: Error) => void;
  const done = new Promise<{ frozenMs: number; entries: number }>((resolve, reject) => {
    resolveDone = resolve;
    rejectDone = reject;
  });
  // Seen by whoever awaits it; the stream's own error reaches its reader as well.
  done.catch(() => {});
  let thawed = false;
  const finish = async (err?: Error) => {
    if (thawed) return;
    thawed = true;
    try {
      await thaw();
    } finally {
      if (err) rejectDone(err);
      else resolveDone({ frozenMs: Math.round(performance.now() - started), entries: count });
    }
  };
  const source = options.entries();
  const counted = (async function* () {
    try {
      for await (const entry of source) {
        count++;
        yield entry;
      }
    } catch (err) {
      await finish(err as Error);
      throw err;
    }
    // Every file's content is read by the time the next entry (or the end) is asked for.
    await finish();
  })();
  const stream = encodeSnapshot(counted);
  stream.once('close', () => {
    void finish(new Error('snapshot stream closed before its end'));
  });
  return { stream, done, parts: options.parts };
}
