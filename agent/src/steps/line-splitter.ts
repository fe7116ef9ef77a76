import { Limits } from '@sandstream/wire';

/**
 * Turns a byte stream into lines for `ctx.onLine`.
 *
 * - Lines end at `\n`; a `\r` right before it is dropped, so CRLF output reads like LF output.
 * - A line longer than `maxLineBytes` is emitted as several lines of at most that many bytes,
 *   cut on UTF-8 character boundaries. The cut happens as soon as enough bytes arrived, so
 *   a process printing megabytes without a newline never makes us hold more than ~one line.
 * - `end()` emits a final line that had no newline.
 */
export class LineSplitter {
  private pending: Buffer = Buffer.alloc(0);

  constructor(
    private readonly emit: (line: string) => void,
    private readonly maxLineBytes: number = Limits.eventLineMaxBytes,
  ) {
    if (!Number.isInteger(maxLineBytes) || maxLineBytes < 4) {
      // Four bytes is the longest UTF-8 character; below that a cut could never make progress.
      throw new RangeError(`maxLineBytes must be an integer of at least 4, got ${maxLineBytes}`);
    }
  }

  push(chunk: Buffer): void {
    let data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    let newline = data.indexOf(0x0a);
    while (newline !== -1) {
      const end = newline > 0 && data[newline - 1] === 0x0d ? newline - 1 : newline;
      this.emitLine(data.subarray(0, end));
      data = data.subarray(newline + 1);
      newline = data.indexOf(0x0a);
    }
    // No newline in what is left: flush whole pieces of an over-long line now. One extra byte
    // is kept back so that a line of exactly maxLineBytes followed by "\r\n" is not cut before its "\r".
    while (data.length > this.maxLineBytes + 1) {
      const cut = utf8Boundary(data, this.maxLineBytes);
      this.emit(data.subarray(0, cut).toString('utf8'));
      data = data.subarray(cut);
    }
    // Copy so that the (possibly large) chunk we were handed can be garbage-collected.
    this.pending = Buffer.from(data);
  }

  /** Emits the last line if the stream did not end with a newline. */
  end(): void {
    if (this.pending.length === 0) return;
    const data = this.pending;
    this.pending = Buffer.alloc(0);
    const end = data[data.length - 1] === 0x0d ? data.length - 1 : data.length;
    this.emitLine(data.subarray(0, end));
  }

  private emitLine(line: Buffer): void {
    let rest = line;
    while (rest.length > this.maxLineBytes) {
      const cut = utf8Boundary(rest, this.maxLineBytes);
      this.emit(rest.subarray(0, cut).toString('utf8'));
      rest = rest.subarray(cut);
    }
    this.emit(rest.toString('utf8'));
  }
}

/**
 * The largest cut position <= limit that does not fall inside a UTF-8 multi-byte character.
 * Continuation bytes look like 0b10xxxxxx; if the data is not valid UTF-8 we still cut at the limit.
 */
function utf8Boundary(data: Buffer, limit: number): number {
  for (let cut = limit; cut > limit - 4 && cut > 0; cut--) {
    const byte = data[cut];
    if (byte === undefined || (byte & 0xc0) !== 0x80) return cut;
  }
  return limit;
}
