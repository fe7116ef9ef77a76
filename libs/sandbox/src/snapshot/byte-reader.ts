import type { Hash } from 'node:crypto';

/** Exact-length reads over a stream of buffers, hashing what it hands out when asked. */
export class ByteReader {
  private buffered: Buffer[] = [];
  private length = 0;
  private done = false;

  constructor(private readonly source: AsyncIterator<Buffer>) {}

  /** Exactly n bytes, or undefined when the stream ends first. */
  async read(n: number, hash?: Hash): Promise<Buffer | undefined> {
    if (!(await this.fill(n))) return undefined;
    return this.take(n, hash);
  }

  /** The first n bytes without consuming them, or undefined when the stream ends first. */
  async peek(n: number): Promise<Buffer | undefined> {
    if (!(await this.fill(n))) return undefined;
    const out = this.take(n);
    this.buffered.unshift(out);
    this.length += n;
    return out;
  }

  /** Whether the stream has ended with nothing left to read. */
  async atEnd(): Promise<boolean> {
    return !(await this.fill(1));
  }

  /** Between 1 and n bytes, or undefined at the end. */
  async readUpTo(n: number, hash?: Hash): Promise<Buffer | undefined> {
    while (this.length === 0 && !this.done) await this.pull();
    if (this.length === 0) return undefined;
    // From the first buffer only: a file's content is handed out without copying.
    return this.take(Math.min(n, (this.buffered[0] as Buffer).length), hash);
  }

  /** What is buffered, then the rest of the source: for a reader that takes over the stream. */
  async *rest(): AsyncGenerator<Buffer> {
    while (this.buffered.length > 0) {
      const head = this.buffered.shift() as Buffer;
      this.length -= head.length;
      yield head;
    }
    while (!this.done) {
      const next = await this.source.next();
      if (next.done) this.done = true;
      else yield next.value;
    }
  }

  private async fill(n: number): Promise<boolean> {
    while (this.length < n && !this.done) await this.pull();
    return this.length >= n;
  }

  private async pull(): Promise<void> {
    const next = await this.source.next();
    if (next.done) this.done = true;
    else if (next.value.length > 0) {
      this.buffered.push(next.value);
      this.length += next.value.length;
    }
  }

  /** The first n bytes (n <= length), copying only when they span buffers, and only those. */
  private take(n: number, hash?: Hash): Buffer {
    const first = this.buffered[0] as Buffer;
    let out: Buffer;
    if (first.length >= n) {
      out = first.subarray(0, n);
      if (first.length === n) this.buffered.shift();
      else this.buffered[0] = first.subarray(n);
    } else {
      out = Buffer.allocUnsafe(n);
      let at = 0;
      while (at < n) {
        const head = this.buffered[0] as Buffer;
        const part = Math.min(head.length, n - at);
        head.copy(out, at, 0, part);
        at += part;
        if (part === head.length) this.buffered.shift();
        else this.buffered[0] = head.subarray(part);
      }
    }
    this.length -= n;
    hash?.update(out);
    return out;
  }
}
