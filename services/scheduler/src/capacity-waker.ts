import { bullJobId, type KeySpace, type RedisClient } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { Queue } from 'bullmq';

export interface CapacityWakerOptions {
  /** A dedicated connection: BLPOP blocks it. */
  blockingRedis: RedisClient;
  /** Any connection for the quick reads. */
  redis: RedisClient;
  keys: KeySpace;
  jobsQueue: Queue;
  logger: Logger;
  /** Waiting jobs promoted per freed slot: more than one, because the best waiter may be blocked by its tenant limit. */
  wakePerSlot?: number;
  /** BLPOP timeout; bounds how long stop() waits. */
  blockSeconds?: number;
  /** Called after every completed BLPOP (a timeout included): the loop is alive (ProgressWatchdog). */
  onProgress?: () => void;
}

/**
 * Wakes jobs that wait for capacity. Whoever frees a slot LPUSHes to `capacityFreed` (in the
 * same Lua script that frees it); this loop BLPOPs it — blocked in Redis, no polling — and
 * promotes the best-ranked waiting jobs out of BullMQ's delayed set so a scheduler worker
 * re-tries their admission at once.
 */
export class CapacityWaker {
  private loop: Promise<void> | undefined;
  private readonly controller = new AbortController();
  /** Promotions done (for tests and logs). */
  promoted = 0;

  constructor(private readonly options: CapacityWakerOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { blockingRedis, keys, logger } = this.options;
    const blockSeconds = this.options.blockSeconds ?? 1;
    let failures = 0;
    while (!this.controller.signal.aborted) {
      try {
        const popped = await blockingRedis.blpop(keys.capacityFreed, blockSeconds);
        if (popped) await this.wake();
        if (failures > 0) logger.info({ failures }, 'capacity waker: redis works again');
        failures = 0;
        this.options.onProgress?.();
      } catch (err) {
        if (this.controller.signal.aborted) break;
        // One line per outage; the pause grows to 2 s so a long outage costs little.
        if (failures === 0)
          logger.warn({ err: (err as Error).message }, 'capacity waker: redis error; retrying');
        failures++;
        await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** Math.min(failures, 4), 2000)));
      }
    }
  }

  /** Promotes the best waiting jobs; returns how many were promoted. */
  async wake(): Promise<number> {
    const { redis, keys, jobsQueue } = this.options;
    const ids = await redis.zrange(keys.capacityWaiting, 0, (this.options.wakePerSlot ?? 3) - 1);
    let count = 0;
    for (const jobId of ids) {
      const job = await jobsQueue.getJob(bullJobId(jobId));
      if (!job) {
        await redis.zrem(keys.capacityWaiting, jobId);
        continue;
      }
      const state = await job.getState();
      if (state === 'delayed') {
        try {
          await job.promote();
          count++;
        } catch {
          // Another replica promoted it first.
        }
      } else if (state === 'completed' || state === 'failed') {
        // Finished without passing through admission's clean-up (e.g. removed by an operator).
        await redis.zrem(keys.capacityWaiting, jobId);
      }
    }
    this.promoted += count;
    return count;
  }
}
