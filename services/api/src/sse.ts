import { once } from 'node:events';
import type { Server } from 'node:http';
import { FOLLOW_CURSOR_PATTERN } from '@sandstream/client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { problemBody, problemOf } from './problem.js';

/** A comment line this often keeps proxies from closing a quiet stream. */
const HEARTBEAT_MS = 15_000;
/** Written to the socket at once past this many characters waiting. */
const FLUSH_AT_CHARS = 64 * 1024;
/**
 * Bytes the socket may hold unsent before the sender waits for it to drain. Far above the
 * socket's own 16 KiB mark, so that the next page is read from Redis while the client still
 * takes in the last one (waiting at 16 KiB would make every page wait for the client: one
 * page is ~75 KiB), and small enough that a slow client holds a bounded amount per stream.
 */
const MAX_BUFFERED_BYTES = 512 * 1024;

/**
 * A `text/event-stream` response written by hand (the reply is hijacked): each event with its
 * `id` (a stream entry id, so a client that reconnects with Last-Event-ID resumes right after
 * it), its `event` name and JSON `data`. Writes wait while the client reads slowly, so a slow
 * client slows the Redis reads behind it instead of growing memory. `signal` aborts when the
 * client goes away.
 */
export class SseStream {
  private readonly controller = new AbortController();
  private readonly heartbeat: NodeJS.Timeout;
  private pending = '';
  private scheduled = false;
  readonly signal: AbortSignal;

  constructor(
    private readonly request: FastifyRequest,
    private readonly reply: FastifyReply,
  ) {
    this.signal = this.controller.signal;
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      'x-accel-buffering': 'no',
      connection: 'keep-alive',
    });
    reply.raw.flushHeaders();
    const abort = () => this.controller.abort();
    reply.raw.once('close', abort);
    request.raw.once('close', () => {
      if (request.raw.destroyed && !reply.raw.writableEnded) abort();
    });
    this.heartbeat = setInterval(() => this.write(': keep-alive\n\n'), HEARTBEAT_MS);
    this.heartbeat.unref();
  }

  /**
   * Sends one event. Returns a promise only when the socket's buffer is full (resolved once it
   * drained or the client is gone), so a fast client costs no await per event.
   */
  send(event: string, data: unknown, id?: string): Promise<void> | undefined {
    return this.written(this.write(sseEvent(event, data, id)));
  }

  /**
   * Sends events already put together with sseEvent() (a page of them) in one socket write,
   * at once: a caller that has a whole page pays neither the wait for the next loop turn nor
   * a write per event. Same return as send().
   */
  sendText(text: string): Promise<void> | undefined {
    if (this.pending !== '') this.flush();
    this.pending = text;
    return this.written(this.flush());
  }

  private written(ok: boolean): Promise<void> | undefined {
    if (ok) return undefined;
    return Promise.race([once(this.reply.raw, 'drain'), once(this.signal, 'abort')]).then(
      () => undefined,
      () => undefined,
    );
  }

  /** Characters written but not yet taken by the client (the socket's buffer and what waits to go). */
  unsentBytes(): number {
    return this.reply.raw.writableLength + this.pending.length;
  }

  /** Ends the stream with an `error` event carrying the problem details. */
  async fail(err: unknown): Promise<void> {
    const problem = problemOf(err);
    if (problem.status >= 500) this.request.log.error({ err }, 'event stream failed');
    await this.send('error', problemBody(this.request, problem));
    this.end();
  }

  /**
   * Ends a follower's stream because this replica is stopping: the reading loop stops (signal)
   * and the client sees the stream end without its terminal event, which a client (the SDK, an
   * EventSource) takes as a cut connection and resumes, with Last-Event-ID, on another replica.
   */
  endForShutdown(): void {
    this.controller.abort();
    this.end();
  }

  end(): void {
    clearInterval(this.heartbeat);
    this.flush();
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }

  private write(text: string): boolean {
    const raw = this.reply.raw;
    if (this.signal.aborted || raw.writableEnded) return true;
    // Events of one turn of the event loop (a batch read from the stream) leave in one socket
    // write rather than one each; a large batch leaves at once, so what waits here stays small.
    this.pending += text;
    if (this.pending.length >= FLUSH_AT_CHARS) return this.flush();
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.flush();
      });
    }
    return true;
  }

  private flush(): boolean {
    const raw = this.reply.raw;
    const text = this.pending;
    this.pending = '';
    if (text === '' || this.signal.aborted || raw.writableEnded) return true;
    // Past the socket's mark write() returns false and 'drain' follows once all is sent; what
    // decides whether to wait for it is how much is buffered (MAX_BUFFERED_BYTES).
    raw.write(text);
    return raw.writableLength < MAX_BUFFERED_BYTES;
  }
}

/** One event as it goes on the wire: `id` (if any), `event` and its JSON `data`. */
export function sseEvent(event: string, data: unknown, id?: string): string {
  const head = id === undefined ? '' : `id: ${id}\n`;
  return `${head}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

// By HTTP server: request.server is the route's encapsulated plugin, not the app.
const followers = new WeakMap<Server, Set<SseStream>>();

/**
 * Registers a stream that only follows (a timeline, a process's output): ended at once when the
 * server closes (endFollowers, the app's preClose) so a rolling restart does not wait for them.
 * An exec's stream is not one: it is left to finish, as cutting it would lose the command's result.
 */
export function followerStream(request: FastifyRequest, reply: FastifyReply): SseStream {
  const sse = new SseStream(request, reply);
  const server = request.server.server as Server;
  const all = followers.get(server) ?? new Set<SseStream>();
  followers.set(server, all);
  all.add(sse);
  reply.raw.once('close', () => all.delete(sse));
  return sse;
}

/** Ends every follower's stream of this server (its replica is stopping). */
export function endFollowers(server: Server): void {
  for (const sse of followers.get(server) ?? []) sse.endForShutdown();
}

/** Whether the client asked for an event stream rather than one JSON answer. */
export function wantsEventStream(request: FastifyRequest): boolean {
  return (request.headers.accept ?? '').includes('text/event-stream');
}

/** The entry to resume after: Last-Event-ID wins over `?from=` (a reconnecting EventSource sends it). */
export function resumeCursor(request: FastifyRequest, from: string | undefined): string | undefined {
  const header = request.headers['last-event-id'];
  const value = Array.isArray(header) ? header[0] : header;
  if (value !== undefined && FOLLOW_CURSOR_PATTERN.test(value)) return value;
  return from;
}
