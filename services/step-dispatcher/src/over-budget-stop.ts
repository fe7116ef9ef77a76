import {
  freeSandboxFootprint,
  type KeySpace,
  type RedisClient,
  redisBudgetReason,
  SandboxAcl,
  type SandboxRedisUsage,
} from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { StepDispatcher } from './step-dispatcher.js';

export interface OverBudgetStopOptions {
  redis: RedisClient;
  keySpace: KeySpace;
  dispatcher: Pick<StepDispatcher, 'failRunning'>;
  budgetBytes: number;
  logger: Logger;
}

/**
 * Stops a sandbox over its Redis budget, in the order that bounds the damage: cut its Redis user
 * off first (nothing more gets written), then free what it stored, then fail the job (its sandbox
 * is destroyed like a lost one's). Its events stream keeps its newest entries, up to a quarter of
 * the budget, so its last output stays readable; every other key of its own goes but its heartbeat.
 */
export class OverBudgetStop {
  private readonly acl: SandboxAcl;

  constructor(private readonly options: OverBudgetStopOptions) {
    this.acl = new SandboxAcl(options.redis, options.keySpace);
  }

  async stop(usage: SandboxRedisUsage): Promise<void> {
    const { budgetBytes, logger, dispatcher } = this.options;
    const { jobId } = usage;
    logger.warn(
      { jobId, storedBytes: usage.bytes, budgetBytes, largestKey: usage.keys[0]?.key },
      'sandbox over its Redis budget: stopping it',
    );
    await this.cutOff(jobId);
    await this.free(jobId);
    // Failed last: whoever sees the job failed sees what it stored already freed.
    await dispatcher.failRunning(jobId, () => redisBudgetReason(usage.bytes, budgetBytes));
  }

  /**
   * Its footprint as it is now, not as measured (it may have made more before it was cut off), in
   * every database, except its heartbeat (without it the job would read as lost before it is
   * failed) and its events stream, trimmed to its newest entries.
   */
  private async free(jobId: string): Promise<void> {
    const { redis, keySpace, budgetBytes } = this.options;
    const { events } = keySpace.sandbox(jobId);
    await freeSandboxFootprint(redis, keySpace, jobId, { keepOutput: true, keepAlive: true });
    const streamBytes = Number((await redis.memory('USAGE', events, 'SAMPLES', 5)) ?? 0);
    if (streamBytes > budgetBytes / 4) {
      const length = await redis.xlen(events);
      const keep = Math.floor((length * budgetBytes) / 4 / streamBytes);
      await redis.xtrim(events, 'MAXLEN', keep);
    }
  }

  /** No-op where Redis has no per-sandbox users (SANDBOX_ACL off): then only the destroy stops it. */
  private async cutOff(jobId: string): Promise<void> {
    try {
      // SETUSER on a missing user would create one: only an existing user is turned off.
      if (await this.acl.exists(jobId)) await this.acl.disable(jobId);
    } catch (err) {
      this.options.logger.warn({ err, jobId }, 'could not cut a sandbox off Redis; its destroy will');
    }
  }
}
