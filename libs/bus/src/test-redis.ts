import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/**
 * Test helpers: a client on the shared Redis and a random namespace / id suffix, so parallel
 * suites of several engineers never see each other's keys. (Excluded from nothing: it is
 * tiny and has no side effects on import.)
 */
export function testRedisUrl(): string {
  return process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
}

export function connectTestRedis(): Redis {
  return new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
}

export function uniqueSuffix(): string {
  return randomBytes(5).toString('hex');
}
