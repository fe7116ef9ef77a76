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

/**
 * Removes the keys the sandbox itself reads or refreshes (steps, control, heartbeat): without a
 * sandbox they mean nothing, and a shutdown step nobody popped must not wait for a future agent
 * of the same job id. Events and results are the job's output, kept for the dispatcher and the
 * reaper's retention unless `includeOutput` is set.
 */
export async function deleteSandboxKeys(
  redis: Redis,
  jobId: string,
  keyStyle: KeyStyle,
  options: { includeOutput?: boolean } = {},
): Promise<void> {
  const keys = sandboxKeys(jobId, keyStyle);
  const names = [keys.in, keys.control, keys.heartbeat, keys.claim];
  if (options.includeOutput) names.push(keys.events, keys.results);
  // One UNLINK per key: under the plain style the keys may sit in different cluster slots.
  await Promise.all(names.map((name) => redis.unlink(name)));
}
