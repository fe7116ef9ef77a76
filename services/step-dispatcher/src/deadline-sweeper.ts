import {
  type Deadline,
  type DispatchKeys,
  deadlineMember,
  parseDeadlineMember,
  type RedisClient,
} from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import { claimDueScript } from './dispatch-scripts.js';
import { PeriodicTask } from './periodic-task.js';

export interface DeadlineSweeperOptions {
  redis: RedisClient;
  keys: DispatchKeys;
  logger: Logger;
  handle: (deadline: Deadline) => Promise<void>;
  intervalMs?: number;
  leaseMs?: number;
  batchSize?: number;
}

/** One timer for every deadline of every job, instead of a timer per job. */
export class DeadlineSweeper {
  private readonly loop: PeriodicTask;

  constructor(private readonly options: DeadlineSweeperOptions) {
    this.loop = new PeriodicTask(() => this.sweep(), this.options.intervalMs ?? 250);
  }

  async add(deadline: Deadline, atMs: number): Promise<void> {
    const { redis, keys } = this.options;
    await redis.zadd(keys.deadlines(keys.shardOf(deadline.jobId)), atMs, deadlineMember(deadline));
  }

  async remove(...deadlines: Deadline[]): Promise<void> {
    const { redis, keys } = this.options;
    await Promise.all(
      deadlines.map((d) => redis.zrem(keys.deadlines(keys.shardOf(d.jobId)), deadlineMember(d))),
    );
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
      let due: string[];
      try {
        due = await claimDueScript.run<string[]>(redis, [key], [now, now + leaseMs, batch]);
      } catch (err) {
        logger.warn({ err, key }, 'deadline sweep failed');
        continue;
      }
      await Promise.all(
        due.map(async (member) => {
          const deadline = parseDeadlineMember(member);
          try {
            if (deadline) await this.options.handle(deadline);
            await redis.zrem(key, member);
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
