import {
  Code,
  ConnectError,
  createContextKey,
  createContextValues,
  type HandlerContext,
  type Interceptor,
} from '@connectrpc/connect';
import { codeFromString } from '@connectrpc/connect/protocol-connect';
import { Limits } from '@sandstream/wire';
import type { FastifyRequest } from 'fastify';
import { connectErrorOf } from './e2b-errors.js';

/**
 * What the Connect services (served by connect-fastify's plugin, e2b-routes.ts) need of Fastify:
 * the request a call came in on (its principal, set by our authentication hook, and its
 * E2b-Sandbox-Id header decide the sandbox), and our errors as the Connect errors the SDK reads.
 */

const fastifyRequestKey = createContextKey<FastifyRequest | undefined>(undefined, {
  description: 'the Fastify request of a Connect call',
});

/** The plugin's `contextValues`: each call carries its Fastify request. */
export function contextValuesOf(request: FastifyRequest) {
  return createContextValues().set(fastifyRequestKey, request);
}

/** The Fastify request of a call (always there when served through e2b-routes.ts). */
export function requestOf(context: HandlerContext): FastifyRequest {
  const request = context.values.get(fastifyRequestKey);
  if (request === undefined) throw new ConnectError('the call came in without its request', Code.Internal);
  return request;
}

/** Any error as a Connect error: ours (HttpProblem …) by their status, with their message. */
export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  const { code, message } = connectErrorOf(err);
  return new ConnectError(message, codeFromString(code) ?? Code.Internal);
}

function logged(err: unknown, request: FastifyRequest | undefined): ConnectError {
  const error = toConnectError(err);
  // Internal errors are ours to look at; the others are the caller's (a bad path, an unknown pid).
  if (error.code === Code.Internal) request?.log.error({ err }, 'e2b in-sandbox call');
  return error;
}

/**
 * Without it the plugin answers every error that is not a ConnectError as "internal error":
 * a missing sandbox would not be the SDK's NotFoundError. A stream's errors come while it is
 * read, so its messages are wrapped too.
 */
export const connectErrorsInterceptor: Interceptor = (next) => async (req) => {
  const request = req.contextValues.get(fastifyRequestKey);
  try {
    const res = await next(req);
    if (!res.stream) return res;
    const messages = res.message;
    return {
      ...res,
      message: (async function* () {
        try {
          yield* messages;
        } catch (err) {
          throw logged(err, request);
        }
      })(),
    };
  } catch (err) {
    throw logged(err, request);
  }
};

/** The call's deadline (the SDK's timeoutMs, sent as Connect-Timeout-Ms) as our run timeout. */
export function timeoutSecondsOf(context: HandlerContext): number | undefined {
  const ms = context.timeoutMs();
  return ms === undefined ? undefined : Math.min(Limits.runMaxTimeoutSeconds, Math.max(ms, 1) / 1000);
}

/** How often a stream says it is alive when the SDK does not ask (its Keepalive-Ping-Interval). */
const DEFAULT_KEEPALIVE_SECONDS = 50;

export function keepaliveMsOf(context: HandlerContext): number {
  const asked = Number(context.requestHeader.get('keepalive-ping-interval'));
  return (Number.isFinite(asked) && asked > 0 ? asked : DEFAULT_KEEPALIVE_SECONDS) * 1000;
}

/** The call's own deadline passed (Connect-Timeout-Ms): the plugin aborted its signal with it. */
export function deadlineOf(context: HandlerContext): ConnectError | undefined {
  const reason: unknown = context.signal.reason;
  return reason instanceof ConnectError && reason.code === Code.DeadlineExceeded ? reason : undefined;
}
