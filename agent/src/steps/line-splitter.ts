import { Limits } from '@sandstream/wire';

/**
 * Lets a LineSplitter skip decoding lines its consumer would only drop. A chatty step can
 * print far faster than Redis takes it (`seq 1 1000000`: a million lines in a fraction of a
 * second); turning each dropped line into a string just to count it cost the agent most of
 * its CPU, which it then did not have for shipping the lines it kept.
 */
export interface LineGate {
  /** False while every further line would be dropped. */
  accepting(): boolean;
  /** Called instead of emit for a line (or a piece of an over-long line) that was not decoded. */
  dropped(): void;
}

const EMPTY = Buffer.alloc(0);
const LF = 0x0a;
const CR = 0x0d;

/**
 * Turns a byte stream into lines for `ctx.onLine`.
 *
 * - Lines end at `\n`; a `\r` right before it is dropped, so CRLF output reads like LF output.
 * - A line longer than `maxLineBytes` is emitted as several lines of at most that many bytes,
 *   cut on UTF-8 character boundaries. The cut happens as soon as enough bytes arrived, so
 *   a process printing megabytes without a newline never makes us hold more than ~one line.
 * - `end()` emits a final line that had no newline.
 *
 * Lines are decoded straight from the chunk by offsets (no Buffer object per line), and while
 * the gate is closed they are only counted, piece by piece exactly as they would have been
 * emitted, so a follower's seq numbers are the same either way.
 */
export class LineSplitter {
  private pending: Buffer = EMPTY;

  constructor(
    private readonly emit: (line: string) => void,
    private readonly maxLineBytes: number = Limits.eventLineMaxBytes,
    private readonly gate?: LineGate,
  ) {
    if (!Number.isInteger(maxLineBytes) || maxLineBytes < 4) {
      // Four bytes is the longest UTF-8 character; below that a cut could never make progress.
      throw new RangeError(`maxLineBytes must be an integer of at least 4, got ${maxLineBytes}`);
    }
  }

  push(chunk: Buffer): void {
    const data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    let start = 0;
    let newline = data.indexOf(LF);
    while (newline !== -1) {
      const end = newline > start && data[newline - 1] === CR ? newline - 1 : newline;
      this.emitRange(data, start, end);
      start = newline + 1;
      newline = data.indexOf(LF, start);
    }
    // No newline in what is left: flush whole pieces of an over-long line now. One extra byte
    // is kept back so that a line of exactly maxLineBytes followed by "\r\n" is not cut before its "\r".
    while (data.length - start > this.maxLineBytes + 1) {
      const cut = utf8Boundary(data, start + this.maxLineBytes);
      this.emitPiece(data, start, cut);
      start = cut;
    }
    // Copy so that the (possibly large) chunk we were handed can be garbage-collected.
    this.pending = start < data.length ? Buffer.from(data.subarray(start)) : EMPTY;
  }

  /** Emits the last line if the stream did not end with a newline. */
  end(): void {
    if (this.pending.length === 0) return;
    const data = this.pending;
    this.pending = EMPTY;
    const end = data[data.length - 1] === CR ? data.length - 1 : data.length;
    this.emitRange(data, 0, end);
  }

  private emitRange(data: Buffer, start: number, end: number): void {
    let from = start;
    while (end - from > this.maxLineBytes) {
      const cut = utf8Boundary(data, from + this.maxLineBytes);
      this.emitPiece(data, from, cut);
      from = cut;
    }
    this.emitPiece(data, from, end);
  }

  private emitPiece(data: Buffer, start: number, end: number): void {
    if (this.gate && !this.gate.accepting()) this.gate.dropped();
    else this.emit(data.toString('utf8', start, end));
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
