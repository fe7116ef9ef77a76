/**
 * Sandstream's own infrastructure (its Redis, or the API's) did not answer: nothing was decided
 * about the call, which may be tried again once it is back. Over Redis it stands for ioredis's
 * connection errors (its `cause`); over HTTP for the API's 503 (problem kind
 * `infrastructure-unavailable`). The CLI exits 3 with it (125 for `exec`).
 */
export class InfrastructureUnavailableError extends Error {
  override readonly name = 'InfrastructureUnavailableError';
}

/**
 * Errors of ioredis (and of BullMQ on its connection) that say Redis could not be reached, as
 * opposed to Redis answering with an error. ioredis has no class for most of them, so they are
 * told by name, by the socket's error code, or by the fixed message ioredis words them with.
 */
const CONNECTION_ERROR_NAMES = new Set(['MaxRetriesPerRequestError', 'ClusterAllFailedError']);
const CONNECTION_ERROR_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
const CONNECTION_ERROR_MESSAGES = [
  'Connection is closed.',
  "Stream isn't writeable and enableOfflineQueue options is false",
];
/** Replies of a Redis that is there but cannot serve yet (loading its data, a failover). */
const UNAVAILABLE_REPLY = /^(LOADING|MASTERDOWN|CLUSTERDOWN|TRYAGAIN) /;

/** The InfrastructureUnavailableError `err` stands for, if it is one of Redis's connection errors. */
export function infrastructureErrorOf(err: unknown): InfrastructureUnavailableError | undefined {
  if (err instanceof InfrastructureUnavailableError) return err;
  if (!(err instanceof Error)) return undefined;
  const code = (err as { code?: unknown }).code;
  const unavailable =
    CONNECTION_ERROR_NAMES.has(err.name) ||
    (typeof code === 'string' && CONNECTION_ERROR_CODES.has(code)) ||
    CONNECTION_ERROR_MESSAGES.includes(err.message) ||
    (err.name === 'ReplyError' && UNAVAILABLE_REPLY.test(err.message));
  if (!unavailable) return undefined;
  return new InfrastructureUnavailableError(`Redis is unavailable: ${err.message}`, { cause: err });
}

/** `err` as InfrastructureUnavailableError when it is a connection error, else as it is. */
export function translateInfrastructureError(err: unknown): unknown {
  return infrastructureErrorOf(err) ?? err;
}

/**
 * `target` (a transport) with every method's rejection, and every error its async generators
 * throw, translated by translateInfrastructureError: a caller of the SDK over Redis catches one
 * typed error for an outage, whatever call met it. `forTenant` answers a transport, guarded too.
 */
export function guardInfrastructureErrors<T extends object>(target: T): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const result: unknown = Reflect.apply(value, object, args);
        if (property === 'forTenant' && typeof result === 'object' && result !== null)
          return guardInfrastructureErrors(result);
        if (result instanceof Promise)
          return result.catch((err: unknown) => {
            throw translateInfrastructureError(err);
          });
        if (isAsyncGenerator(result)) return guardGenerator(result);
        return result;
      };
    },
  });
}

function isAsyncGenerator(value: unknown): value is AsyncGenerator<unknown, unknown, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    Symbol.asyncIterator in value &&
    typeof (value as { next?: unknown }).next === 'function'
  );
}

async function* guardGenerator<T, R>(
  inner: AsyncGenerator<T, R, undefined>,
): AsyncGenerator<T, R, undefined> {
  try {
    return yield* inner;
  } catch (err) {
    throw translateInfrastructureError(err);
  }
}
