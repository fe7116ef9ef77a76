import type { FastifyReply, FastifyRequest } from 'fastify';
import { END_STREAM, envelope } from './connect-envelope.js';
import { type ConnectError, connectErrorOf } from './e2b-errors.js';

/** The one request message of a server stream (an enveloped JSON), parsed. */
export function requestMessage(body: unknown): unknown {
  if (!Buffer.isBuffer(body) || body.length < 5) throw new Error('the request is not one Connect envelope');
  const length = body.readUInt32BE(1);
  if (body.length !== 5 + length) throw new Error('the request envelope length does not match its body');
  return JSON.parse(body.subarray(5).toString('utf8'));
}

/** A server stream being answered: messages, then its end (with an error or not). */
export class ConnectServerStream {
  private ended = false;
  /** Aborted when the client goes away before the end. */
  readonly gone = new AbortController();

  constructor(
    request: FastifyRequest,
    private readonly reply: FastifyReply,
  ) {
    reply.hijack();
    reply.raw.writeHead(200, { 'content-type': 'application/connect+json' });
    reply.raw.once('close', () => {
      if (!this.ended) this.gone.abort(new Error('the caller went away'));
    });
    void request;
  }

  send(message: unknown): void {
    if (!this.ended) this.reply.raw.write(envelope(0, message));
  }

  end(error?: ConnectError): void {
    if (this.ended) return;
    this.ended = true;
    this.reply.raw.end(envelope(END_STREAM, error ? { error } : {}));
  }

  fail(err: unknown): void {
    this.end(connectErrorOf(err));
  }
}

/** What `Connect-Timeout-Ms` asks (the SDK's timeoutMs of a command), when it asks. */
export function connectTimeoutMs(request: FastifyRequest): number | undefined {
  const raw = request.headers['connect-timeout-ms'];
  const ms = typeof raw === 'string' ? Number(raw) : Number.NaN;
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}
