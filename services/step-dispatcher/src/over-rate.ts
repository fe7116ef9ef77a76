import { redisRateReason, type SandboxRedisRate } from '@sandstream/bus';
import type { OverLimit } from './over-limit-stop.js';

/** A sandbox over its Redis rate, for OverLimitStop: cut off and failed, nothing to free first. */
export function overRate(rate: SandboxRedisRate, limitPerSecond: number): OverLimit {
  return {
    jobId: rate.jobId,
    limit: 'rate',
    measured: { perSecond: Math.round(rate.perSecond), limitPerSecond, source: rate.source },
    reason: () => redisRateReason(rate, limitPerSecond),
  };
}
