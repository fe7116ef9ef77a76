import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A capture's spool file while it is still being written (CaptureCache.spool), which a restore on
 * the same replica may read as it grows: a fork placed on the node that captures restores while
 * the capture runs, so its time is about the larger of the two rather than their sum. A reader
 * follows the file to its final size; what it read must hash to what the writer hashed, or its
 * stream fails at the end (the restore fails, and the start is retried on a clean sandbox).
 */
export class GrowingSpool {
  private ended: { sizeBytes: number; sha256: string } | undefined;
  private failure: Error | undefined;
  private wake = signal();

  constructor(readonly path: string) {}

  /** More bytes reached the file. */
  grew(): void {
    const woken = this.wake;
    this.wake = signal();
    woken.resolve();
  }

  /** Every byte is in the file (flushed), with the writer's size and hash. */
  finish(sizeBytes: number, sha256: string): void {
    this.ended = { sizeBytes, sha256 };
    this.grew();
  }

  /** The capture failed: readers fail with it. */
  fail(err: Error): void {
    this.failure = err;
    this.grew();
  }

  /** The bytes from the start, waiting for more until the writer finishes. */
  async *follow(): AsyncGenerator<Buffer> {
    const file = await open(this.path, 'r');
    try {
      const hash = createHash('sha256');
      let offset = 0;
      for (;;) {
        // Read before looking at the end: the end seen before a read that found nothing is final.
        const ended = this.ended;
        const woken = this.wake.promise;
        const buffer = Buffer.allocUnsafe(1 << 20);
        const { bytesRead } = await file.read(buffer, 0, buffer.length, offset);
        if (bytesRead > 0) {
          const chunk = buffer.subarray(0, bytesRead);
          hash.update(chunk);
          offset += bytesRead;
          yield chunk;
          continue;
        }
        if (this.failure) throw this.failure;
        if (ended) {
          const sha256 = hash.digest('hex');
          if (offset !== ended.sizeBytes || sha256 !== ended.sha256)
            throw new Error(
              `the capture's spool read back as ${offset} bytes hashing to ${sha256}, written as ${ended.sizeBytes} bytes hashing to ${ended.sha256}`,
            );
          return;
        }
        // Woken by the writer; the timer covers bytes flushed between the read and the wait.
        await Promise.race([woken, sleep(20)]);
      }
    } finally {
      await file.close();
    }
  }
}

/** A promise and its resolve (Node 20 has no Promise.withResolvers). */
export function signal(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}
