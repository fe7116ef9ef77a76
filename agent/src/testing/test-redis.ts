import type { Redis } from 'ioredis';
import { afterAll } from 'vitest';
import { testClient } from './agent-harness.js';

/**
 * The set-up most agent test files share: one client on the test Redis for the whole file, and
 * clean-ups (agents to stop, keys to delete) run once its tests are done, failures ignored so
 * that one cannot hide the others. Call at the top level of a test file.
 */
export function useTestRedis(): { redis: Redis; cleanups: (() => Promise<unknown>)[] } {
  const redis = testClient();
  const cleanups: (() => Promise<unknown>)[] = [];
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup().catch(() => {});
    redis.disconnect();
  });
  return { redis, cleanups };
}
