import {
  bullJobId,
  type JobStore,
  type KeySpace,
  type RedisClient,
  type SlotAdmission,
} from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { Queue } from 'bullmq';

export interface CapacityWakerOptions {
  /** A dedicated connection: BLPOP blocks it. */
  blockingRedis: RedisClient;
  /** Any connection for the quick reads. */
  redis: RedisClient;
  keys: KeySpace;
  /** Reserves the slot a woken job will take (the limits are admission's). */
  admission: SlotAdmission;
  /** Where a waiting job's tenant and state are read. */
  store: JobStore;
  jobsQueue: Queue;
  logger: Logger;
  /**
   * Waiting jobs looked at per wake-up at most. Jobs whose tenant is full are skipped over, so
   * this bounds one wake-up's work when many of those sit ahead of the first that fits.
   */
  maxScan?: number;
  /** BLPOP timeout (default 5 s): an idle scheduler wakes this often. stop() does not wait for it. */
  blockSeconds?: number;
  /** Called after every completed BLPOP (a timeout included): the loop is alive (ProgressWatchdog). */
  onProgress?: () => void;
}

/**
 * Wakes jobs that wait for capacity. Whoever frees a slot LPUSHes to `capacityFreed` (in the
 * same Lua script that frees it); this loop BLPOPs it — blocked in Redis, no polling — and then
 * fills every free slot: walking the waiting set best rank first, it reserves a slot for each
 * waiter that fits (lease-reserve: global and tenant limits checked, the waiter taken out of the
 * set, atomically) and promotes that job out of BullMQ's delayed set. Exactly as many jobs are
 * woken as there are slots they can take, and each woken admission passes; a waiter whose tenant
 * is full is skipped, not woken. (It used to promote the best three waiters per freed slot, so
 * that one blocked by its tenant would not stall the others: a burst of 100 jobs made ~190
 * admission runs that found no slot.)
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
    // The BLPOP ends now instead of at its timeout. A signal Redis popped for us just before is
    // then lost with the connection: one last wake-up (on the other connection) does its work.
    this.options.blockingRedis.disconnect();
    const interrupted = this.loop !== undefined;
    await this.loop;
    // Not against a Redis that is gone: the stop must not wait for it.
    if (interrupted && this.options.redis.status === 'ready') {
      await this.wake().catch((err: Error) =>
        this.options.logger.warn({ err: err.message }, 'capacity waker: last wake-up at stop failed'),
      );
    }
  }

  private async run(): Promise<void> {
    const { blockingRedis, keys, logger } = this.options;
    const blockSeconds = this.options.blockSeconds ?? 5;
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

  /** Reserves a slot for, and promotes, as many waiting jobs as can take one; returns how many. */
  async wake(): Promise<number> {
    const { redis, keys, admission, store } = this.options;
    const maxScan = this.options.maxScan ?? 200;
    let woken = 0;
    // Waiters passed over (tenant full) stay in the set ahead of the rest: skip them by offset.
    let skipped = 0;
    for (let scanned = 0; scanned < maxScan; ) {
      const ids = await redis.zrange(keys.capacityWaiting, skipped, skipped + 19);
      if (ids.length === 0) break;
      for (const jobId of ids) {
        scanned++;
        const record = await store.get(jobId);
        if (!record || (record.state !== 'queued' && record.state !== 'scheduled')) {
          // Finished, cancelled or gone without passing through admission's clean-up.
          await redis.zrem(keys.capacityWaiting, jobId);
          continue;
        }
        const reserved = await admission.reserve(jobId, record.tenant);
        if (reserved === 'global') return this.woke(woken);
        if (reserved === 'tenant') skipped++;
        else if (reserved === 'reserved' && (await this.promote(jobId, record.tenant, record.resumes ?? 0)))
          woken++;
      }
    }
    return this.woke(woken);
  }

  private woke(count: number): number {
    this.promoted += count;
    return count;
  }

  /**
   * Moves a job whose slot is reserved out of the delayed set; false (and the slot given back)
   * when BullMQ has no run left for it. One that is not delayed is in the wait list or running
   * already, and its run finds the slot; one caught between its failed acquire and parking
   * promotes itself (schedule-job.ts looks for a reserved slot after parking).
   */
  private async promote(jobId: string, tenant: string, resumes: number): Promise<boolean> {
    // A resumed sandbox waits under the BullMQ id of its current life.
    const job = await this.options.jobsQueue.getJob(bullJobId(jobId, resumes));
    const state = job ? await job.getState() : 'missing';
    if (state === 'missing' || state === 'completed' || state === 'failed') {
      // Removed by an operator, say: nobody would ever use (or renew away) this slot.
      await this.options.admission.release(jobId, tenant);
      return false;
    }
    if (state !== 'delayed') return true;
    try {
      await job?.promote();
    } catch {
      // Another replica, or the job itself, promoted it first.
    }
    return true;
  }
}
