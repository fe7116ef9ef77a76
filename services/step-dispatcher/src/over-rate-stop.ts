import {
  type KeySpace,
  type RedisClient,
  redisRateReason,
  SandboxAcl,
  type SandboxRedisRate,
} from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { StepDispatcher } from './step-dispatcher.js';

export interface OverRateStopOptions {
  redis: RedisClient;
  keySpace: KeySpace;
  dispatcher: Pick<StepDispatcher, 'failRunning'>;
  limitPerSecond: number;
  logger: Logger;
}

/**
 * Stops a sandbox over its Redis rate: its Redis user turned off and its connections killed
 * first (CLIENT KILL USER: the flood ends at once, for it alone; CLIENT PAUSE would stop every
 * tenant), then its job failed (its sandbox is destroyed as a lost one's, and what it stored is
 * freed with it). Throttling instead was not an option Redis offers per user.
 */
export class OverRateStop {
  private readonly acl: SandboxAcl;

  constructor(private readonly options: OverRateStopOptions) {
    this.acl = new SandboxAcl(options.redis, options.keySpace);
  }

  async stop(rate: SandboxRedisRate): Promise<void> {
    const { limitPerSecond, logger, dispatcher } = this.options;
    logger.warn(
      { jobId: rate.jobId, perSecond: Math.round(rate.perSecond), limitPerSecond, source: rate.source },
      'sandbox over its Redis rate: stopping it',
    );
    try {
      // SETUSER on a missing user would create one: only an existing user is turned off.
      if (await this.acl.exists(rate.jobId)) await this.acl.disable(rate.jobId);
    } catch (err) {
      logger.warn({ err, jobId: rate.jobId }, 'could not cut a sandbox off Redis; its destroy will');
    }
    await dispatcher.failRunning(rate.jobId, () => redisRateReason(rate, limitPerSecond));
  }
}
