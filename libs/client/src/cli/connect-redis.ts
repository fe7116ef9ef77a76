import { createRedis, type RedisClient } from '@sandstream/bus';
import { redactUrl } from './connection-config.js';

export class RedisUnreachableError extends Error {
  override readonly name = 'RedisUnreachableError';
}

export interface CliRedis {
  redis: RedisClient;
  /** The last connection error ioredis reported (for a "lost Redis" message mid-run). */
  lastError(): Error | undefined;
}

export interface ConnectOptions {
  /** Connection attempts before giving up at start (a refused port fails each in ~1 ms). */
  attempts?: number;
  /** Overall bound on the first connection (a host that drops packets never refuses). */
  timeoutMs?: number;
  /** Reconnects allowed once connected (Redis restarting under a `logs -f`). */
  reconnects?: number;
  /** Where the URL came from, when that helps (a stale local.json of a stopped `npm start`). */
  source?: string | undefined;
}

/**
 * The CLI's Redis connection, connected before any command runs. A service retries forever, but
 * a person at a terminal wants one line and an exit code promptly: a few attempts, then
 * RedisUnreachableError naming the URL (password masked) and the socket's own reason. An
 * `error` listener is attached first, so ioredis never prints its "Unhandled error event" traces.
 */
export async function connectCliRedis(url: string, options: ConnectOptions = {}): Promise<CliRedis> {
  const attempts = options.attempts ?? 3;
  const timeoutMs = options.timeoutMs ?? 5000;
  const reconnects = options.reconnects ?? 30;
  let ready = false;
  let lastError: Error | undefined;
  const redis = createRedis({
    url,
    role: 'producer',
    connectionName: 'sandstream-cli',
    overrides: {
      connectTimeout: timeoutMs,
      // How long ioredis keeps a closing socket before destroying it; its 2 s default held the
      // CLI open for 2 s after its last word whenever Redis had gone away.
      disconnectTimeout: 100,
      // null ends the connection ('end'); before the first ready that means "unreachable".
      retryStrategy: (times) =>
        ready ? (times > reconnects ? null : Math.min(times * 200, 1000)) : times >= attempts ? null : 100,
    },
  });
  redis.on('error', (err: Error) => {
    lastError = err;
  });
  await new Promise<void>((resolve, reject) => {
    const fail = (reason: string) => {
      cleanup();
      // Not once ended: ioredis would arm a 2 s timer for a socket that is already closed,
      // keeping the process alive for nothing.
      if (redis.status !== 'end') redis.disconnect();
      const from = options.source ? ` (from ${options.source})` : '';
      reject(new RedisUnreachableError(`cannot reach Redis at ${redactUrl(url)}${from}: ${reason}`));
    };
    const onReady = () => {
      cleanup();
      ready = true;
      resolve();
    };
    const onEnd = () => fail(lastError?.message ?? 'connection closed');
    const timer = setTimeout(
      () => fail(lastError?.message ?? `no answer within ${timeoutMs / 1000} s`),
      timeoutMs,
    );
    const cleanup = () => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      redis.off('end', onEnd);
    };
    redis.on('ready', onReady);
    redis.on('end', onEnd);
  });
  return { redis, lastError: () => lastError };
}
