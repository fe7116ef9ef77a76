import type { IncomingHttpHeaders } from 'node:http';

/** An answer head larger than this is refused (Node's and undici's own default limit). */
export const MAX_ANSWER_HEAD_BYTES = 16 * 1024;

/** How the answer's body is delimited on the upstream connection (RFC 9112 §6.3). */
export type BodyFraming =
  | { kind: 'none' }
  | { kind: 'length'; length: number }
  | { kind: 'chunked' }
  | { kind: 'close' };

export interface AnswerHead {
  status: number;
  /** End-to-end headers as the client gets them (hop-by-hop ones removed), repeated names as arrays. */
  headers: IncomingHttpHeaders;
  framing: BodyFraming;
  /** Whether the upstream connection may carry another request after this answer. */
  keepAlive: boolean;
}

/** A malformed or refused answer from the sandbox's app; `message` says what was wrong. */
export class AnswerHeadError extends Error {}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
// Field values: visible ASCII, obs-text, space and tab; never a bare CR or LF, never NUL.
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: [\t\x20-\x7e\x80-\xff]*)?$/;
/** Headers of one connection only (RFC 9110 §7.6.1), never forwarded; either way. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
]);

/**
 * Parses one answer head (`head` is its bytes up to, not including, the blank line) of a GET
 * sent by the preview proxy. Strict: anything a careful parser would refuse is an AnswerHeadError
 * (the proxy answers 502), since the app in the sandbox is not trusted.
 */
export function parseAnswerHead(head: Buffer): AnswerHead {
  const lines = head.toString('latin1').split('\r\n');
  const status = STATUS_LINE.exec(lines[0] ?? '');
  if (!status)
    throw new AnswerHeadError(
      `the status line is not HTTP/1.x: ${JSON.stringify((lines[0] ?? '').slice(0, 80))}`,
    );
  const minor = Number(status[1]);
  const code = Number(status[2]);
  const fields = new Map<string, string[]>();
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon) : '';
    if (!TOKEN.test(name)) throw new AnswerHeadError(`header line ${i} is not name: value`);
    const value = line.slice(colon + 1).trim();
    if (!FIELD_VALUE.test(value)) throw new AnswerHeadError(`header ${name} holds a control character`);
    const lower = name.toLowerCase();
    const seen = fields.get(lower);
    if (seen) seen.push(value);
    else fields.set(lower, [value]);
  }

  const connection = (fields.get('connection') ?? []).flatMap((v) =>
    v
      .toLowerCase()
      .split(',')
      .map((t) => t.trim()),
  );
  let keepAlive = minor === 1 ? !connection.includes('close') : connection.includes('keep-alive');
  const headers: IncomingHttpHeaders = {};
  for (const [name, values] of fields) {
    // Hop-by-hop headers, and those the app's Connection names, belong to the upstream hop only.
    if (HOP_BY_HOP.has(name) || connection.includes(name)) continue;
    headers[name] = values.length === 1 ? values[0] : values;
  }

  const framing = framingOf(code, fields);
  if (framing.kind === 'close') keepAlive = false;
  // Both a length and a coding: the coding wins and the connection is not trusted again (RFC 9112 §6.3).
  if (framing.kind === 'chunked' && fields.has('content-length')) {
    delete headers['content-length'];
    keepAlive = false;
  }
  return { status: code, headers, framing, keepAlive };
}

function framingOf(code: number, fields: Map<string, string[]>): BodyFraming {
  if (code === 204 || code === 304) return { kind: 'none' };
  const codings = fields.get('transfer-encoding');
  if (codings) {
    const list = codings.flatMap((v) =>
      v
        .toLowerCase()
        .split(',')
        .map((t) => t.trim()),
    );
    if (list.length === 1 && list[0] === 'chunked') return { kind: 'chunked' };
    // Another coding (or chunked not last): nothing to relay it as; refused rather than guessed.
    throw new AnswerHeadError(`transfer-encoding ${codings.join(', ')} is not supported (chunked only)`);
  }
  const lengths = fields.get('content-length');
  if (lengths) {
    const distinct = new Set(lengths.flatMap((v) => v.split(',').map((t) => t.trim())));
    const [only] = distinct;
    if (distinct.size !== 1 || only === undefined || !/^\d{1,15}$/.test(only))
      throw new AnswerHeadError(`content-length ${lengths.join(', ')} is not one decimal length`);
    return { kind: 'length', length: Number(only) };
  }
  return { kind: 'close' };
}

/**
 * Follows a chunked body's framing without copying it: told each piece read from the upstream,
 * it answers how much of the piece to relay as it is. The last chunk (`0\r\n`) and any trailers
 * are held back (the client's side writes its own last chunk), as is a size line cut in two by
 * the socket, which is relayed once whole.
 */
export class ChunkedScanner {
  private state: 'size' | 'ext' | 'sizeLf' | 'data' | 'dataCr' | 'dataLf' | 'trailer' | 'trailerLf' | 'done' =
    'size';
  private size = 0;
  private digits = 0;
  private lineLength = 0;
  private trailerBytes = 0;
  /** A size line's start, carried over from the previous piece (relayed with the next). */
  private held: Buffer | undefined;
  /** Per scan: where the current size line starts, and where the last chunk starts (-1: not seen). */
  private lineStart = -1;
  private cut = -1;

  /** True once the last chunk and the trailers' end were read. */
  get done(): boolean {
    return this.state === 'done';
  }

  /**
   * Takes the next piece; answers the bytes to relay now and how many bytes of the piece were
   * past the body's end (a well-behaved app sends none).
   */
  push(piece: Buffer): { relay: Buffer; extra: number } {
    if (this.state === 'trailer' || this.state === 'trailerLf' || this.state === 'done') {
      // Past the last chunk: the trailers are read and dropped, never relayed.
      const end = this.scan(piece, 0);
      return { relay: piece.subarray(0, 0), extra: piece.length - end };
    }
    // A held size line was scanned already: scanning goes on after it, the line starting at 0.
    const start = this.held ? this.held.length : 0;
    const buf = this.held ? Buffer.concat([this.held, piece]) : piece;
    this.held = undefined;
    this.lineStart = start > 0 ? 0 : -1;
    this.cut = -1;
    const end = this.scan(buf, start);
    if (this.cut >= 0) return { relay: buf.subarray(0, this.cut), extra: buf.length - end };
    if (this.state === 'size' || this.state === 'ext' || this.state === 'sizeLf') {
      // A size line not yet whole: kept until it is, so that the last chunk is never half relayed.
      const from = this.lineStart >= 0 ? this.lineStart : buf.length;
      if (from < buf.length) this.held = Buffer.from(buf.subarray(from));
      return { relay: buf.subarray(0, from), extra: 0 };
    }
    return { relay: buf, extra: 0 };
  }

  /** Advances the framing over `buf` from `i`; answers where it stopped (the body's end, or buf's). */
  private scan(buf: Buffer, i: number): number {
    while (i < buf.length && this.state !== 'done') {
      switch (this.state) {
        case 'data': {
          const take = Math.min(this.size, buf.length - i);
          i += take;
          this.size -= take;
          if (this.size === 0) this.state = 'dataCr';
          break;
        }
        case 'dataCr':
          this.expect(buf[i++], 13, 'dataLf');
          break;
        case 'dataLf':
          this.expect(buf[i++], 10, 'size');
          break;
        case 'size': {
          if (this.digits === 0) this.lineStart = i;
          const c = buf[i++] as number;
          const hex = hexValue(c);
          if (hex >= 0) {
            if (++this.digits > 12) throw new AnswerHeadError('a chunk size is over 12 hex digits');
            this.size = this.size * 16 + hex;
          } else if (this.digits > 0 && c === 13) this.state = 'sizeLf';
          else if (this.digits > 0 && (c === 59 || c === 32 || c === 9)) {
            this.state = 'ext';
            this.lineLength = 0;
          } else throw new AnswerHeadError('a chunk size line is malformed');
          break;
        }
        case 'ext': {
          const c = buf[i++] as number;
          if (c === 13) this.state = 'sizeLf';
          else if (++this.lineLength > 4096) throw new AnswerHeadError('a chunk extension is over 4 KiB');
          break;
        }
        case 'sizeLf':
          this.expect(buf[i++], 10, 'data');
          this.digits = 0;
          if (this.size === 0) {
            // The last chunk: nothing from its size line on is relayed.
            this.cut = this.lineStart;
            this.state = 'trailer';
            this.lineLength = 0;
          }
          break;
        case 'trailer': {
          const c = buf[i++] as number;
          if (++this.trailerBytes > 16 * 1024) throw new AnswerHeadError('the trailers are over 16 KiB');
          if (c === 13) this.state = 'trailerLf';
          else this.lineLength++;
          break;
        }
        case 'trailerLf':
          this.expect(buf[i++], 10, 'trailer');
          if (this.lineLength === 0) this.state = 'done';
          this.lineLength = 0;
          break;
      }
    }
    return i;
  }

  private expect(c: number | undefined, want: number, next: ChunkedScanner['state']): void {
    if (c !== want) throw new AnswerHeadError('a chunk is not followed by CRLF');
    this.state = next;
  }
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}
