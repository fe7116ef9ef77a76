import { Limits } from '@sandstream/wire/lean';

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
  /**
   * Optional back-pressure: asked when accepting() is false. True means the line must wait, not
   * be dropped: the splitter stops and holds the rest of its input until resume().
   */
  holding?(): boolean;
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
 *
 * A gate that is holding (back-pressure) stops the splitter before the next piece: push()
 * returns false and keeps the unprocessed rest (and any chunk pushed meanwhile, in order) until
 * resume(), which picks up at exactly that piece, so the numbering is the same as without a stop.
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

  /** Input not processed yet because the gate was holding, oldest first. */
  private held: Buffer[] = [];

  /** True while input waits for resume(). */
  get holding(): boolean {
    return this.held.length > 0;
  }

  /** Bytes waiting for resume() (tests and metrics). */
  get heldBytes(): number {
    let bytes = this.pending.length;
    for (const chunk of this.held) bytes += chunk.length;
    return bytes;
  }

  /**
   * Splits a chunk. Returns false when the gate held it (part or all of it waits for resume());
   * a chunk pushed while earlier input is held waits behind it.
   */
  push(chunk: Buffer): boolean {
    if (this.held.length > 0) {
      this.held.push(chunk);
      return false;
    }
    return this.process(chunk);
  }

  /** Continues with held input; returns false if the gate held it again. */
  resume(): boolean {
    while (this.held.length > 0) {
      const chunk = this.held.shift() as Buffer;
      if (!this.process(chunk)) {
        // process() held the rest of this chunk; it goes before the chunks after it.
        const rest = this.held.pop() as Buffer;
        this.held.unshift(rest);
        return false;
      }
    }
    return true;
  }

  /**
   * Counts everything held as dropped lines (through the gate, piece by piece as they would have
   * been emitted) and forgets it: for a step that stops waiting for room (it was cancelled).
   */
  dropHeld(): void {
    const gate = this.gate;
    const chunks = this.held;
    this.held = [];
    if (!gate || chunks.length === 0) return;
    const dropAll: LineGate = { accepting: () => false, dropped: () => gate.dropped() };
    const counter = new LineSplitter(() => {}, this.maxLineBytes, dropAll);
    for (const chunk of chunks) counter.push(chunk);
    // The stream is over (the caller gives up on it): a last line without its newline counts too.
    counter.end();
  }

  /** Processes one chunk; on a hold, puts the unprocessed rest on `held` and returns false. */
  private process(chunk: Buffer): boolean {
    const data = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = EMPTY;
    let start = 0;
    let newline = data.indexOf(LF);
    while (newline !== -1) {
      const end = newline > start && data[newline - 1] === CR ? newline - 1 : newline;
      const stoppedAt = this.emitRange(data, start, end);
      if (stoppedAt !== -1) return this.hold(data, stoppedAt);
      start = newline + 1;
      newline = data.indexOf(LF, start);
    }
    // No newline in what is left: flush whole pieces of an over-long line now. One extra byte
    // is kept back so that a line of exactly maxLineBytes followed by "\r\n" is not cut before its "\r".
    while (data.length - start > this.maxLineBytes + 1) {
      const cut = utf8Boundary(data, start + this.maxLineBytes);
      if (!this.emitPiece(data, start, cut)) return this.hold(data, start);
      start = cut;
    }
    // Copy so that the (possibly large) chunk we were handed can be garbage-collected.
    this.pending = start < data.length ? Buffer.from(data.subarray(start)) : EMPTY;
    return true;
  }

  private hold(data: Buffer, from: number): false {
    // A view: the chunk stays alive while held, which back-pressure keeps to a few chunks.
    this.held.push(data.subarray(from));
    return false;
  }

  /** Emits the last line if the stream did not end with a newline. Call it once nothing is held. */
  end(): void {
    if (this.pending.length === 0) return;
    const data = this.pending;
    this.pending = EMPTY;
    const end = data[data.length - 1] === CR ? data.length - 1 : data.length;
    // The last line is delivered even if the gate is holding: the stream is over, nothing
    // would resume it, and it is at most a few pieces.
    this.emitRange(data, 0, end, true);
  }

  /** Returns -1 when the whole range went out, else where it stopped because the gate held. */
  private emitRange(data: Buffer, start: number, end: number, force = false): number {
    let from = start;
    while (end - from > this.maxLineBytes) {
      const cut = utf8Boundary(data, from + this.maxLineBytes);
      if (!this.emitPiece(data, from, cut, force)) return from;
      from = cut;
    }
    return this.emitPiece(data, from, end, force) ? -1 : from;
  }

  /** False when the gate holds the piece (nothing was emitted or counted). */
  private emitPiece(data: Buffer, start: number, end: number, force = false): boolean {
    const gate = this.gate;
    if (gate && !gate.accepting()) {
      if (!gate.holding?.()) {
        gate.dropped();
        return true;
      }
      if (!force) return false;
    }
    this.emit(data.toString('utf8', start, end));
    return true;
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
