import { type KeyStyle, newShutdownStep, sandboxKeys } from '@sandstream/wire';
import type { Redis } from 'ioredis';

/**
 * Asks the agent to exit by queueing a shutdown step. LPUSH goes to the producer end of the
 * list, so steps already queued still run first; callers who want the agent gone now kill it
 * after their grace period.
 */
export async function requestAgentShutdown(redis: Redis, jobId: string, keyStyle: KeyStyle): Promise<void> {
  await redis.lpush(sandboxKeys(jobId, keyStyle).in, JSON.stringify(newShutdownStep()));
}
