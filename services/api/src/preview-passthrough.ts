import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import {
  type AnswerHead,
  AnswerHeadError,
  ChunkedScanner,
  HOP_BY_HOP,
  MAX_ANSWER_HEAD_BYTES,
  parseAnswerHead,
} from './preview-answer-head.js';
import type { Upstream } from './preview-upstream-sockets.js';

/**
 * The preview proxy's pass-through for body-less GETs (the bulk of a preview's traffic: pages,
 * assets, downloads). Its request head is written to a kept-alive connection to the sandbox's
 * port and its answer head parsed here; the body is then relayed from that socket to the client's
 * as the bytes come, framing and all, with no HTTP parser or stream between them (a chunked body
 * keeps its chunks; only the last chunk is written by the client's side). This is what makes a
 * large download cheap for the API: the generic path (reply-from and undici) parsed every chunk
 * in wasm and re-chunked it through three streams.
 */

// The request head is written anew: the connection's own headers, and the framing and host the
// pass-through sets itself.
const REQUEST_DROPPED: ReadonlySet<string> = new Set([...HOP_BY_HOP, 'content-length', 'host']);

/** Reads (of up to 64 KB) of an answer's body queued for the client before the app's socket is paused. */
const IN_FLIGHT_READS = 16;

/** Whether a request can take the pass-through: a body-less HTTP/1.1 GET with nothing unusual. */
export function passesThrough(
  request: Pick<IncomingMessage, 'method' | 'httpVersion' | 'headers'>,
  path: string,
): boolean {
  const h = request.headers;
  if (request.method !== 'GET' || request.httpVersion !== '1.1') return false;
  if (h.upgrade !== undefined || h.expect !== undefined || h['transfer-encoding'] !== undefined) return false;
  if (h['content-length'] !== undefined && h['content-length'] !== '0') return false;
  // A path reply-from would refuse (`..` segments, bad escapes) is left to it, and to its answer.
  try {
    const decoded = decodeURIComponent(path);
    return decoded !== '..' && !decoded.includes('/..') && !decoded.includes('../');
  } catch {
    return false;
  }
}

/** The request head sent upstream: the client's end-to-end headers, Host set to the sandbox's. */
export function requestHead(path: string, host: string, headers: IncomingHttpHeaders): string {
  const named = new Set(
    String(headers.connection ?? '')
      .toLowerCase()
      .split(',')
      .map((t) => t.trim()),
  );
  let head = `GET ${path} HTTP/1.1\r\nhost: ${host}\r\n`;
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || REQUEST_DROPPED.has(name) || named.has(name)) continue;
    // Node's parser refused CR, LF and NUL in the client's headers: they are safe to write back.
    if (Array.isArray(value)) for (const v of value) head += `${name}: ${v}\r\n`;
    else head += `${name}: ${value}\r\n`;
  }
  return `${head}\r\n`;
}

/**
 * The answer's headers over the ones the API set on the reply before it (the preview cookie of
 * authorizePreview, …), as reply-from's copy onto the reply did: the app's replace ours of the
 * same name, except Set-Cookie, where both are kept.
 */
export function mergeHeaders(
  ours: Record<string, number | string | string[] | undefined>,
  theirs: IncomingHttpHeaders,
): OutgoingHttpHeaders {
  const merged: OutgoingHttpHeaders = { ...ours };
  for (const [name, value] of Object.entries(theirs)) {
    if (value === undefined) continue;
    const before = merged[name];
    if (name === 'set-cookie' && before !== undefined)
      merged[name] = [
        ...(Array.isArray(before) ? before : [String(before)]),
        ...(Array.isArray(value) ? value : [value]),
      ];
    else merged[name] = value;
  }
  return merged;
}

/** An answer whose head was read; its body is still on `socket`, after `rest`. */
export interface UpstreamAnswer {
  head: AnswerHead;
  upstream: Upstream;
  rest: Buffer;
}

/** Why the exchange failed before an answer head: the proxy's 502 names it. */
export class UpstreamError extends Error {}

/**
 * Writes the request on `socket` and reads the answer's head (informational 1xx answers
 * skipped). Rejects with UpstreamError (the socket destroyed) on a close, error, malformed head,
 * or no head within `headersTimeoutMs`.
 */
export function exchange(
  upstream: Upstream,
  head: string,
  headersTimeoutMs: number,
): Promise<UpstreamAnswer> {
  const { socket } = upstream;
  return new Promise<UpstreamAnswer>((resolve, reject) => {
    let settled = false;
    let buffered: Buffer = Buffer.alloc(0);
    const finish = (err: Error | undefined, answer?: UpstreamAnswer) => {
      settled = true;
      clearTimeout(timer);
      socket.off('end', onEnd).off('close', onEnd).off('error', onError);
      if (err || !answer) {
        socket.destroy();
        reject(err instanceof UpstreamError ? err : new UpstreamError(err?.message ?? 'no answer'));
      } else resolve(answer);
    };
    /** One read: its bytes copied (the read buffer goes back at once), the head looked for. */
    const onRead = (data: Buffer, done: () => void): boolean => {
      if (settled) {
        done();
        return false;
      }
      const from = Math.max(0, buffered.length - 3);
      buffered = Buffer.concat([buffered, data]);
      done();
      try {
        for (;;) {
          const end = buffered.indexOf('\r\n\r\n', from, 'latin1');
          if (end === -1) {
            if (buffered.length > MAX_ANSWER_HEAD_BYTES)
              throw new AnswerHeadError(`the answer's head is over ${MAX_ANSWER_HEAD_BYTES} bytes`);
            return true;
          }
          const parsed = parseAnswerHead(buffered.subarray(0, end));
          buffered = buffered.subarray(end + 4);
          if (parsed.status === 101) throw new AnswerHeadError('101 Switching Protocols to a plain GET');
          if (parsed.status >= 200) {
            // Paused (the false returned) until the relay takes the reads: no byte of the body is lost.
            finish(undefined, { head: parsed, upstream, rest: buffered });
            return false;
          }
          // 1xx (100, 103 …): informational, not relayed; the final answer follows.
        }
      } catch (err) {
        finish(err instanceof Error ? err : new Error(String(err)));
        return false;
      }
    };
    const onEnd = () => finish(new UpstreamError('the app closed the connection before answering'));
    const onError = (err: NodeJS.ErrnoException) => finish(new UpstreamError(err.code ?? err.message));
    const timer = setTimeout(
      () => finish(new UpstreamError(`no answer within ${headersTimeoutMs} ms`)),
      headersTimeoutMs,
    );
    upstream.onRead(onRead);
    // 'close' too: a socket destroyed here (the client gone) emits neither 'end' nor 'error'.
    socket.on('end', onEnd).on('close', onEnd).on('error', onError);
    socket.write(head, 'latin1');
    socket.resume();
  });
}

/**
 * Relays an answer to the client: its head (headers already rewritten), then its body straight
 * from the upstream socket. `done(reusable)` is called once, when the upstream socket is free:
 * reusable when the body was read whole and the app keeps the connection open.
 */
export function relay(
  answer: UpstreamAnswer,
  headers: OutgoingHttpHeaders,
  res: ServerResponse,
  done: (reusable: boolean) => void,
): void {
  const { head, upstream } = answer;
  const { socket } = upstream;
  const framing = head.framing;
  if (framing.kind === 'chunked') res.writeHead(head.status, { ...headers, 'transfer-encoding': 'chunked' });
  else res.writeHead(head.status, headers);
  if (framing.kind === 'none' || (framing.kind === 'length' && framing.length === 0)) {
    res.end();
    const reusable = head.keepAlive && answer.rest.length === 0;
    if (!reusable) socket.destroy();
    done(reusable);
    return;
  }

  // A chunked body is relayed with its own framing: written to the client's socket itself (the
  // response, told it is chunked, would frame every write again); the response writes the last
  // chunk at its end. A length or close-delimited body goes through the response, unframed or
  // framed by it.
  res.flushHeaders();
  const client = res.socket;
  if (!client) {
    socket.destroy();
    done(false);
    return;
  }
  const out = framing.kind === 'chunked' ? client : res;
  const scanner = framing.kind === 'chunked' ? new ChunkedScanner() : undefined;
  let remaining = framing.kind === 'length' ? framing.length : 0;
  let settled = false;
  // Reads whose bytes are still being written to the client: past IN_FLIGHT_READS the app's
  // socket is paused, and resumed once half of them are written.
  let inFlight = 0;
  let paused = false;
  const settle = (reusable: boolean) => {
    if (settled) return;
    settled = true;
    socket.off('end', onEnd).off('close', onClose).off('error', onClose);
    res.off('close', onClientClose);
    if (reusable) socket.pause();
    else socket.destroy();
    done(reusable);
  };
  const onClientClose = () => {
    // The client went before the body's end: the upstream connection's state is unknown.
    if (!res.writableFinished) settle(false);
  };
  const written = (release: () => void) => () => {
    release();
    inFlight--;
    if (paused && inFlight <= IN_FLIGHT_READS / 2 && !settled) {
      paused = false;
      socket.resume();
    }
  };
  const write = (piece: Buffer, release: () => void) => {
    if (piece.length === 0) return release();
    inFlight++;
    // The read buffer goes back to the pool once the client's socket has taken its bytes.
    out.write(piece, written(release));
  };
  const complete = (extra: number) => {
    res.end();
    settle(head.keepAlive && extra === 0);
  };
  const take = (piece: Buffer, release: () => void) => {
    if (scanner) {
      const { relay: now, extra } = scanner.push(piece);
      write(now, release);
      if (scanner.done) complete(extra);
    } else if (framing.kind === 'length') {
      const now = piece.length <= remaining ? piece : piece.subarray(0, remaining);
      remaining -= now.length;
      write(now, release);
      if (remaining === 0) complete(piece.length - now.length);
    } else write(piece, release);
  };
  const onRead = (piece: Buffer, release: () => void): boolean => {
    if (settled) {
      release();
      return false;
    }
    try {
      take(piece, release);
    } catch {
      // A malformed chunk after the head went out: the client's answer can only be cut short.
      res.destroy();
      settle(false);
    }
    if (settled) return false;
    if (inFlight >= IN_FLIGHT_READS) paused = true;
    return !paused;
  };
  const onEnd = () => {
    if (framing.kind === 'close') complete(1);
    else onClose();
  };
  const onClose = () => {
    // The app closed (or failed) before its body's end: the client sees the answer cut short.
    res.destroy();
    settle(false);
  };
  res.on('close', onClientClose);
  socket.on('end', onEnd).on('close', onClose).on('error', onClose);
  upstream.onRead(onRead);
  if (answer.rest.length > 0) onRead(answer.rest, () => {});
  if (!settled && !paused) socket.resume();
}
