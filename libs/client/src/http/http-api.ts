import { InfrastructureUnavailableError } from '../infrastructure-errors.js';
import { CutStreamError, EventRequests, RequestFailedError } from './http-event-request.js';
import {
  errorOfProblem,
  ProblemBodySchema,
  type ProblemSubject,
  SandstreamApiError,
} from './problem-errors.js';
import { sendSized } from './sized-upload.js';
import { parseEventStream, type ServerSentEvent } from './sse-parser.js';

export type Query = Record<string, string | number | boolean | readonly string[] | undefined>;

export interface ApiRequest {
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  query?: Query | undefined;
  /** JSON (an object), text, bytes, or a stream of bytes (sent as it is read). */
  body?: unknown;
  contentType?: string;
  accept?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** What the request is about, for the error a refusal becomes. */
  subject?: ProblemSubject;
  /** Statuses answered as they are rather than thrown (404 for a get that may find nothing). */
  allow?: readonly number[];
  /**
   * Text or bytes sent only once the API invited them (`Expect: 100-continue`, sized-upload.ts):
   * a body it refuses from the headers (over its limit) is never sent.
   */
  expectContinue?: boolean;
}

/** The API could not be reached at all (refused, reset, DNS): the CLI exits 3 with this. */
export class ApiUnreachableError extends Error {
  override readonly name = 'ApiUnreachableError';
}

/**
 * The HTTP API's base URL and key, and one fetch (Node's own, undici) per call: the key as a
 * bearer token, JSON in and out, a refusal (problem+json) thrown as the SDK error it stands for.
 */
export class HttpApi {
  readonly base: string;
  /** Event streams go over node:http, on keep-alive connections of their own (http-event-request.ts). */
  private readonly eventRequests: EventRequests;

  constructor(
    url: string,
    private readonly apiKey: string | undefined,
  ) {
    this.base = url.replace(/\/+$/, '');
    this.eventRequests = new EventRequests(this.base.startsWith('https:'));
  }

  /** Closes the kept-alive connections of event streams. */
  close(): void {
    this.eventRequests.close();
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}), ...extra };
  }

  url(path: string, query: Query = {}): string {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) {
      // A list is the key repeated, once per item, in order.
      if (Array.isArray(v)) for (const item of v) search.append(k, item);
      else if (v !== undefined) search.set(k, String(v));
    }
    const qs = search.toString();
    return `${this.base}${path}${qs ? `?${qs}` : ''}`;
  }

  async request(path: string, options: ApiRequest = {}): Promise<Response> {
    const headers: Record<string, string> = {};
    let body: NonNullable<RequestInit['body']> | undefined;
    if (options.body !== undefined) {
      const b = options.body;
      if (typeof b === 'string' || b instanceof Uint8Array || isAsyncIterable(b)) {
        body = b as NonNullable<RequestInit['body']>;
        headers['content-type'] = options.contentType ?? 'application/octet-stream';
      } else {
        body = JSON.stringify(b);
        headers['content-type'] = 'application/json';
      }
    }
    if (options.accept) headers.accept = options.accept;
    Object.assign(headers, options.headers);
    let response: Response;
    try {
      const b = options.body;
      response =
        options.expectContinue && (typeof b === 'string' || b instanceof Uint8Array)
          ? await sendSized(
              new URL(this.url(path, options.query)),
              options.method ?? 'PUT',
              this.headers(headers),
              typeof b === 'string' ? Buffer.from(b) : b,
            )
          : await fetch(this.url(path, options.query), {
              method: options.method ?? 'GET',
              headers: this.headers(headers),
              ...(body !== undefined ? { body } : {}),
              // A streamed body (a tar upload) needs half-duplex in Node's fetch.
              ...(body !== undefined && isAsyncIterable(body) ? { duplex: 'half' } : {}),
              ...(options.signal ? { signal: options.signal } : {}),
            } as RequestInit);
    } catch (err) {
      if (options.signal?.aborted) throw err;
      const cause = (err as { cause?: { message?: string } }).cause?.message ?? (err as Error).message;
      throw new ApiUnreachableError(`cannot reach the API at ${this.base}: ${cause}`);
    }
    if (response.ok || options.allow?.includes(response.status)) return response;
    throw await this.refusal(response, options.subject ?? {});
  }

  async json<T>(path: string, options: ApiRequest = {}): Promise<T> {
    const response = await this.request(path, options);
    return (await response.json()) as T;
  }

  /** The JSON answer, or null for a 404 (a get of something that does not exist). */
  async jsonOrNull<T>(path: string, options: ApiRequest = {}): Promise<T | null> {
    const response = await this.request(path, { ...options, allow: [404] });
    if (response.status === 404) {
      await response.body?.cancel();
      return null;
    }
    return (await response.json()) as T;
  }

  /** The SDK error a non-2xx answer stands for. */
  async refusal(response: Response, subject: ProblemSubject): Promise<Error> {
    const text = await response.text().catch(() => '');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    const problem = ProblemBodySchema.safeParse(parsed);
    if (problem.success) return errorOfProblem(problem.data, subject);
    return new SandstreamApiError(
      response.status,
      undefined,
      `${response.status} ${response.statusText}${text ? `: ${text.slice(0, 200)}` : ''}`,
    );
  }

  /** The events of a `text/event-stream` answer. */
  async *events(path: string, options: ApiRequest = {}): AsyncGenerator<ServerSentEvent, void, undefined> {
    const b = options.body;
    if (b instanceof Uint8Array || isAsyncIterable(b))
      throw new TypeError('events(): a request body is JSON or text (no stream of bytes)');
    const headers: Record<string, string> = { accept: 'text/event-stream', ...options.headers };
    if (b !== undefined)
      headers['content-type'] =
        typeof b === 'string' ? (options.contentType ?? 'text/plain') : 'application/json';
    let response: Awaited<ReturnType<EventRequests['send']>>;
    try {
      response = await this.eventRequests.send(this.url(path, options.query), {
        method: options.method ?? 'GET',
        headers: this.headers(headers),
        body: b === undefined ? undefined : typeof b === 'string' ? b : JSON.stringify(b),
        signal: options.signal,
      });
    } catch (err) {
      if (err instanceof RequestFailedError)
        throw new ApiUnreachableError(`cannot reach the API at ${this.base}: ${err.message}`);
      throw err;
    }
    const status = response.statusCode ?? 0;
    if (status < 200 || status > 299) {
      const text = await this.eventRequests.text(response).catch(() => '');
      throw await this.refusal(
        new Response(text, { status, statusText: response.statusMessage ?? '' }),
        options.subject ?? {},
      );
    }
    yield* parseEventStream(this.eventRequests.body(response, options.signal));
  }
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

/** A response body that broke off mid-stream (undici's "terminated", a reset socket). */
export function isCutStream(err: unknown): boolean {
  if (err instanceof CutStreamError) return true;
  return err instanceof TypeError && /terminated|fetch failed/i.test(err.message);
}

/**
 * An error that a follow waits out rather than ends with: its stream cut, the API unreachable
 * (a replica restarting), or the API answering that its Redis is away (503).
 */
export function isPassingOutage(err: unknown): boolean {
  return (
    err instanceof ApiUnreachableError || err instanceof InfrastructureUnavailableError || isCutStream(err)
  );
}
