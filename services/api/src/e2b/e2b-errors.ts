import { ConnectError } from '@connectrpc/connect';
import { encodeEnvelope } from '@connectrpc/connect/protocol';
import { codeFromString, endStreamFlag, endStreamToJson } from '@connectrpc/connect/protocol-connect';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { HttpProblem, problemOf } from '../problem.js';

/**
 * Errors as the e2b SDK reads them. Its control-plane client reads `{ code, message }` with the
 * HTTP status as code (a 404 becomes its NotFoundError); its Connect clients read a Connect
 * error: `{ code: "not_found", message }`, with the HTTP status Connect gives that code (unary),
 * or in the stream's end message (server streams). Inside a call, e2b-connect.ts's interceptor
 * hands ours to connect-fastify's plugin; this handler answers those that come before it.
 */

const CONNECT_CODES: Record<number, string> = {
  400: 'invalid_argument',
  401: 'unauthenticated',
  403: 'permission_denied',
  404: 'not_found',
  409: 'already_exists',
  413: 'resource_exhausted',
  422: 'failed_precondition',
  429: 'resource_exhausted',
  501: 'unimplemented',
  503: 'unavailable',
  504: 'deadline_exceeded',
};

/** The HTTP status Connect's unary protocol answers each code with. */
const CONNECT_STATUS: Record<string, number> = {
  invalid_argument: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  already_exists: 409,
  failed_precondition: 400,
  resource_exhausted: 429,
  unimplemented: 501,
  unavailable: 503,
  deadline_exceeded: 504,
  internal: 500,
};

export interface ConnectErrorJson {
  code: string;
  message: string;
}

/** A Connect error for any error (problemOf decides its status and says what it may). */
export function connectErrorOf(err: unknown): ConnectErrorJson {
  const problem = problemOf(err);
  return { code: CONNECT_CODES[problem.status] ?? 'internal', message: problem.detail };
}

/** The call is not (yet) served here: the SDK's own "unimplemented", naming it. */
export function unsupported(call: string): HttpProblem {
  return new HttpProblem(501, 'bad-request', `${call} is not supported by Sandstream's E2B API yet`);
}

/** Error handler of the control-plane routes: `{ code, message }`. */
export function controlPlaneErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const problem = problemOf(err);
  if (problem.status >= 500) request.log.error({ err }, 'e2b control plane');
  return reply.code(problem.status).send({ code: problem.status, message: problem.detail });
}

/**
 * Error handler of the in-sandbox routes for what fails before a Connect call reaches the plugin
 * (our authentication hook's 401, a rate limit) and of /files: a Connect error.
 */
export function connectErrors(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const error = connectErrorOf(err);
  if (error.code === 'internal') request.log.error({ err }, 'e2b in-sandbox call');
  // A server stream's error is its end message, its status 200: Connect clients read no other.
  const contentType = String(request.headers['content-type'] ?? '');
  if (contentType.startsWith('application/connect+')) {
    const end = endStreamToJson(
      new Headers(),
      new ConnectError(error.message, codeFromString(error.code)),
      {},
    );
    const body = encodeEnvelope(endStreamFlag, new TextEncoder().encode(JSON.stringify(end)));
    // The answer's codec is the request's (a client refuses another); its end message is JSON in both.
    return reply
      .code(200)
      .type(
        contentType.startsWith('application/connect+proto')
          ? 'application/connect+proto'
          : 'application/connect+json',
      )
      .send(Buffer.from(body));
  }
  return reply.code(CONNECT_STATUS[error.code] ?? 500).send(error);
}

/** A Connect request's message, parsed by its schema; a bad one is a 400 naming the call and field. */
export function parseMessage<T>(schema: z.ZodType<T>, value: unknown, call: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new HttpProblem(
    400,
    'invalid-request',
    `${call}: ${issue?.path.join('.') || 'request'}: ${issue?.message ?? 'invalid'}`,
  );
}
