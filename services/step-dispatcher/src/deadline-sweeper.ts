import { type Deadline, type DispatchKeys, parseDeadlineMember, type RedisClient } from '@sandstream/bus';
import { PeriodicTask } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';
import { claimDueScript } from './dispatch-scripts.js';

export interface DeadlineSweeperOptions {
  redis: RedisClient;
  keys: DispatchKeys;
  logger: Logger;
  /** Handles a due deadline; a returned time (epoch ms) keeps the deadline, due again then. */
  handle: (deadline: Deadline) => Promise<number | undefined>;
  intervalMs?: number;
  leaseMs?: number;
  batchSize?: number;
  /** Called after every completed sweep (see ProgressWatchdog). */
  onProgress?: () => void;
}

/** One timer for every deadline of every job, instead of a timer per job. */
export class DeadlineSweeper {
  private readonly loop: PeriodicTask;

  constructor(private readonly options: DeadlineSweeperOptions) {
    this.loop = new PeriodicTask(() => this.sweep(), this.options.intervalMs ?? 250, {
      name: 'deadline sweep',
      logger: options.logger,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
  }

  start(): void {
    this.loop.start();
  }

  async sweep(): Promise<void> {
    const { redis, keys, logger } = this.options;
    const leaseMs = this.options.leaseMs ?? 30_000;
    const batch = this.options.batchSize ?? 500;
    for (const shard of keys.allShards()) {
      const key = keys.deadlines(shard);
      const now = Date.now();
      // A failure rejects the sweep: the periodic task backs off and logs once per outage.
      const due = await claimDueScript.run<string[]>(redis, [key], [now, now + leaseMs, batch]);
      await Promise.all(
        due.map(async (member) => {
          const deadline = parseDeadlineMember(member);
          try {
            const again = deadline ? await this.options.handle(deadline) : undefined;
            if (again === undefined) await redis.zrem(key, member);
            // XX: a deadline the job's end removed meanwhile stays removed.
            else await redis.zadd(key, 'XX', again, member);
          } catch (err) {
            logger.error({ err, member }, 'deadline handler failed; retried after the lease');
          }
        }),
      );
    }
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
