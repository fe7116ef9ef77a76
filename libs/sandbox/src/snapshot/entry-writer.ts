import type { EntryOp } from './entry-ops.js';
import type { WriterReply } from './entry-writer-thread.js';
import type { RestoredEntry } from './snapshot-entry.js';
import { openSession } from './writer-thread.js';

/** Files up to this size are gathered whole into a batch; larger ones go in pieces. */
const SMALL_FILE_BYTES = 1 << 20;
/** A batch's data buffer: a whole small file always fits one. */
const BATCH_BYTES = 1 << 20;
/** Entries in one batch at most: one message, one acknowledgement. */
const BATCH_OPS = 512;
/** Bytes handed to the writer thread and not yet written: what a restore adds to memory. */
const MAX_IN_FLIGHT_BYTES = 16 << 20;
/** Batches not yet acknowledged (those of directories alone carry no bytes). */
const MAX_IN_FLIGHT_BATCHES = 32;
/** Batch buffers handed back by the writer thread kept for reuse: as many as may be in flight. */
const MAX_SPARE_BUFFERS = MAX_IN_FLIGHT_BYTES / BATCH_BYTES;

/**
 * Writes restored entries onto a file system through the writer thread (entry-ops.ts,
 * writer-thread.ts): the entries are gathered into batches of up to 512 entries or 1 MB of
 * content, each sent as one message whose data buffer is transferred, not copied; the thread
 * applies them in order with synchronous system calls. On the thread pool, 10,000 small files
 * cost the main thread ~50,000 submissions, callbacks and promises (docs/benchmarks.md); now a
 * message per batch. The thread hands each batch's buffer back and the next batch reuses it: a
 * new 1 MB buffer per batch (one per MB restored) was zeroed and page-faulted in by the main
 * thread, ~0.2 s of its CPU in a 200 MB restore's profile. Large files are streamed in pieces,
 * never held whole. Directory modes and times are set by `finish`, deepest first. `close`
 * releases the session of a restore that stopped midway.
 */
export class EntryWriter {
  private thread: ReturnType<typeof openSession> | undefined;
  private ops: EntryOp[] = [];
  private data: Buffer | undefined;
  private used = 0;
  private nextBatch = 1;
  /** Bytes of each unacknowledged batch. */
  private readonly inFlight = new Map<number, number>();
  private inFlightBytes = 0;
  private wake: (() => void) | undefined;
  /** Buffers of BATCH_BYTES the thread handed back, for the next batches. */
  private readonly spare: ArrayBuffer[] = [];
  private failure: Error | undefined;
  private closed = false;

  /** Queues one entry's write at `full`; resolves once it is queued. Returns its content bytes. */
  async write(full: string, { entry, content }: RestoredEntry): Promise<number> {
    this.throwIfFailed();
    if (entry.type === 'whiteout' || entry.type === 'dir' || entry.type === 'symlink') {
      for await (const _ of content) {
      }
      this.ops.push(entry.type === 'whiteout' ? { op: 'whiteout', full } : { op: entry.type, full, entry });
      await this.flushWhenFull();
      return 0;
    }
    if (entry.size <= SMALL_FILE_BYTES) {
      await this.reserve(entry.size);
      const at = this.used;
      for await (const chunk of content) this.copyIn(chunk);
      this.ops.push({ op: 'file', full, entry, at, length: this.used - at });
      await this.flushWhenFull();
      return this.used - at;
    }
    this.ops.push({ op: 'begin', full, entry });
    let bytes = 0;
    for await (const chunk of content) {
      await this.reserve(chunk.length);
      const at = this.used;
      this.copyIn(chunk);
      this.ops.push({ op: 'append', at, length: chunk.length });
      bytes += chunk.length;
    }
    this.ops.push({ op: 'end', full, entry });
    await this.flushWhenFull();
    return bytes;
  }

  /** Waits until everything queued is written; throws the first failure. */
  async drain(): Promise<void> {
    await this.flush();
    while (this.inFlight.size > 0 && !this.failure) await this.nextReply();
    this.throwIfFailed();
  }

  /** Every write done, then directory modes and times, deepest first; the session ends. */
  async finish(): Promise<void> {
    this.ops.push({ op: 'finish' });
    try {
      await this.drain();
    } finally {
      this.close();
    }
  }

  /** Ends the session (a restore that stopped midway, or finished): the thread forgets it. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.thread?.send({ session: this.thread.session, close: true }, []);
    } catch {
      // The thread is gone, and the session with it.
    }
  }

  private throwIfFailed(): void {
    if (this.failure) throw this.failure;
    if (this.closed) throw new Error('restore writer used after it was closed');
  }

  /** Room for `bytes` more in the current batch's buffer, sending it first if it is too full. */
  private async reserve(bytes: number): Promise<void> {
    if (this.data && this.used + bytes <= this.data.length) return;
    await this.flush();
    const size = Math.max(BATCH_BYTES, bytes);
    // Not Buffer.allocUnsafe: small ones come from a shared pool, which cannot be transferred.
    this.data = Buffer.from((size === BATCH_BYTES && this.spare.pop()) || new ArrayBuffer(size));
    this.used = 0;
  }

  private copyIn(chunk: Buffer): void {
    const data = this.data as Buffer;
    // A file that outgrew its header's size is refused by the decoder; never past the buffer.
    this.used += chunk.copy(data, this.used);
  }

  private async flushWhenFull(): Promise<void> {
    if (this.ops.length >= BATCH_OPS) await this.flush();
  }

  /** Sends the current batch, then waits while too much is outstanding. */
  private async flush(): Promise<void> {
    this.throwIfFailed();
    if (this.ops.length > 0) {
      this.thread ??= openSession({
        reply: (reply) => this.onReply(reply),
        lost: (err) => this.fail(err),
      });
      const batch = this.nextBatch++;
      const bytes = this.used;
      const buffer = this.data && bytes > 0 ? (this.data.buffer as ArrayBuffer) : undefined;
      this.thread.send(
        { session: this.thread.session, batch, ops: this.ops, data: buffer },
        buffer ? [buffer] : [],
      );
      this.inFlight.set(batch, bytes);
      this.inFlightBytes += bytes;
      this.ops = [];
      if (buffer) {
        this.data = undefined;
        this.used = 0;
      }
    }
    while (
      !this.failure &&
      (this.inFlightBytes > MAX_IN_FLIGHT_BYTES || this.inFlight.size >= MAX_IN_FLIGHT_BATCHES)
    )
      await this.nextReply();
    this.throwIfFailed();
  }

  private nextReply(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
    });
  }

  private onReply({ batch, error, data }: WriterReply): void {
    if (data?.byteLength === BATCH_BYTES && this.spare.length < MAX_SPARE_BUFFERS) this.spare.push(data);
    this.inFlightBytes -= this.inFlight.get(batch) ?? 0;
    this.inFlight.delete(batch);
    if (error) this.fail(Object.assign(new Error(error.message), error.code ? { code: error.code } : {}));
    this.wakeUp();
  }

  private fail(err: Error): void {
    this.failure ??= err;
    this.wakeUp();
  }

  private wakeUp(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
