import { type KeySpace, type RedisClient, SandboxAcl } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { StepDispatcher } from './step-dispatcher.js';

export interface OverLimitStopOptions {
  redis: RedisClient;
  keySpace: KeySpace;
  dispatcher: Pick<StepDispatcher, 'failRunning'>;
  logger: Logger;
}

/** A sandbox over one of its Redis limits, as the monitor that found it tells it. */
export interface OverLimit {
  jobId: string;
  /** The limit it is over, in the log line: 'budget', 'rate'. */
  limit: string;
  /** What was measured, for the log line. */
  measured: Record<string, unknown>;
  /** The job's failure message. */
  reason: () => string;
  /** What to free once it is cut off and before its job fails (the budget's stop frees what it stored). */
  free?: () => Promise<void>;
}

/**
 * Stops a sandbox over a Redis limit, in the order that bounds the damage: its Redis user turned
 * off and its connections killed first (CLIENT KILL USER: it ends at once, for it alone; CLIENT
 * PAUSE would stop every tenant, and Redis offers no throttle per user), then what the limit
 * frees, then its job failed (its sandbox is destroyed as a lost one's): whoever sees the job
 * failed sees what it stored already freed.
 */
export class OverLimitStop {
  private readonly acl: SandboxAcl;

  constructor(private readonly options: OverLimitStopOptions) {
    this.acl = new SandboxAcl(options.redis, options.keySpace);
  }

  async stop(over: OverLimit): Promise<void> {
    const { logger, dispatcher } = this.options;
    const { jobId } = over;
    logger.warn({ jobId, ...over.measured }, `sandbox over its Redis ${over.limit}: stopping it`);
    await this.cutOff(jobId);
    await over.free?.();
    await dispatcher.failRunning(jobId, over.reason);
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
