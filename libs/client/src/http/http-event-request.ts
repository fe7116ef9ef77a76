import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';

/**
 * A response body that broke off mid-stream on a node:http request (a reset socket, a replica
 * killed): a TypeError saying `terminated`, as undici's fetch reports the same cut, so callers
 * treat both alike (isCutStream in http-api.ts).
 */
export class CutStreamError extends TypeError {
  override readonly name = 'CutStreamError';
  constructor(cause: unknown) {
    super(`terminated: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }
}

/** The connection could not be made or broke before an answer (refused, reset, DNS). */
export class RequestFailedError extends Error {
  override readonly name = 'RequestFailedError';
}

/** A kept-alive connection was closed by the server before it read the request. */
class StaleSocketError extends RequestFailedError {}

export interface EventRequest {
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  signal: AbortSignal | undefined;
}

/**
 * Event-stream requests (a command's output, a job's timeline) over node:http on keep-alive
 * connections, instead of fetch: the SDK's exec over HTTP spent about three times the CPU of a
 * plain node:http request in undici and its web streams (profile in docs/benchmarks.md), where
 * an IncomingMessage is read as an async iterable of Buffers with nothing in between.
 */
export class EventRequests {
  private readonly agent: HttpAgent;

  constructor(private readonly secure: boolean) {
    this.agent = secure ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  }

  /** The response (any status); rejects with RequestFailedError when none came, or the abort reason. */
  async send(url: string, options: EventRequest): Promise<IncomingMessage> {
    try {
      return await this.attempt(url, options);
    } catch (err) {
      // A kept-alive connection the server closed as idle just as this request went out on it:
      // the server never read the request, so it goes again once on a new connection (as
      // Node's documentation of `reusedSocket` advises).
      if (!(err instanceof StaleSocketError)) throw err;
      return this.attempt(url, options);
    }
  }

  private attempt(url: string, options: EventRequest): Promise<IncomingMessage> {
    const send = this.secure ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      const req = send(url, {
        method: options.method,
        agent: this.agent,
        headers: {
          ...options.headers,
          ...(options.body !== undefined
            ? { 'content-length': String(Buffer.byteLength(options.body)) }
            : {}),
        },
        ...(options.signal ? { signal: options.signal } : {}),
      });
      req.on('response', resolve);
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (options.signal?.aborted) reject(options.signal.reason ?? err);
        else if (req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE'))
          reject(new StaleSocketError(err.message));
        else reject(new RequestFailedError(err.message));
      });
      req.end(options.body);
    });
  }

  /** The body's chunks; a body cut short throws CutStreamError (or the abort reason). */
  async *body(response: IncomingMessage, signal: AbortSignal | undefined): AsyncGenerator<Uint8Array> {
    try {
      for await (const chunk of response) yield chunk as Uint8Array;
    } catch (err) {
      if (signal?.aborted) throw signal.reason ?? err;
      throw new CutStreamError(err);
    } finally {
      // Left early (the caller had what it wanted): the socket is not reused mid-body.
      if (!response.complete) response.destroy();
    }
  }

  /** The whole body as text (a refusal's problem+json). */
  async text(response: IncomingMessage): Promise<string> {
    let text = '';
    response.setEncoding('utf8');
    for await (const chunk of response) text += chunk as string;
    return text;
  }

  close(): void {
    this.agent.destroy();
  }
}
