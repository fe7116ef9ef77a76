import {
  freeSandboxFootprint,
  type KeySpace,
  type RedisClient,
  redisBudgetReason,
  type SandboxRedisUsage,
} from '@sandstream/bus';
import type { OverLimit } from './over-limit-stop.js';

/** A sandbox over its Redis budget, for OverLimitStop: what it stored is freed before its job fails. */
export function overBudget(
  usage: SandboxRedisUsage,
  budget: { budgetBytes: number; redis: RedisClient; keySpace: KeySpace },
): OverLimit {
  const { jobId, bytes } = usage;
  const { budgetBytes, redis, keySpace } = budget;
  return {
    jobId,
    limit: 'budget',
    measured: { storedBytes: bytes, budgetBytes, largestKey: usage.keys[0]?.key },
    reason: () => redisBudgetReason(bytes, budgetBytes),
    free: () => freeOverBudget(redis, keySpace, jobId, budgetBytes),
  };
}

/**
 * What a sandbox stopped over its Redis budget keeps: its footprint as it is now, not as measured
 * (it may have made more before it was cut off), is freed in every database, except its heartbeat
 * (without it the job would read as lost before it is failed) and its events stream, trimmed to
 * its newest entries, up to a quarter of the budget, so its last output stays readable.
 */
export async function freeOverBudget(
  redis: RedisClient,
  keySpace: KeySpace,
  jobId: string,
  budgetBytes: number,
): Promise<void> {
  const { events } = keySpace.sandbox(jobId);
  await freeSandboxFootprint(redis, keySpace, jobId, { keepOutput: true, keepAlive: true });
  const streamBytes = Number((await redis.memory('USAGE', events, 'SAMPLES', 5)) ?? 0);
  if (streamBytes > budgetBytes / 4) {
    const length = await redis.xlen(events);
    const keep = Math.floor((length * budgetBytes) / 4 / streamBytes);
    await redis.xtrim(events, 'MAXLEN', keep);
  }
}
