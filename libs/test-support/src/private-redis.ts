import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { type RedisServer, startRedisServer } from './redis-server.js';

export interface PrivateRedis {
  /** The redis-server of this file or suite (its `url` for the code under test). */
  readonly server: RedisServer;
  /** A client on it, for the test's own reads, writes and flushes. */
  readonly redis: Redis;
}

/**
 * A redis-server of the calling file or `describe` alone, with a client on it: for tests that
 * flush, restart or SCAN a Redis, which the shared one must never see. Started before the
 * suite's tests (before hooks registered after this call), stopped after them.
 */
export function usePrivateRedis(clientOptions: RedisOptions = {}): PrivateRedis {
  let server: RedisServer | undefined;
  let redis: Redis | undefined;
  beforeAll(async () => {
    server = await startRedisServer();
    redis = new Redis(server.url, clientOptions);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('usePrivateRedis: used before its beforeAll ran');
    return value;
  };
  return {
    get server() {
      return started(server);
    },
    get redis() {
      return started(redis);
    },
  };
}
