import { type KeySpace, type RedisClient, releaseLock, renewLock, tryLock } from '@sandstream/bus';

/**
 * Per-job leases (short locks owned by this replica's name): a job is archived by whichever
 * replica holds its lease. The owner renews it every tick; a dead replica's lease lapses after
 * `leaseMs` and its jobs move.
 */
export class ArchiveLeases {
  constructor(
    private readonly options: { redis: RedisClient; keys: KeySpace; consumer: string; leaseMs: number },
  ) {}

  /** True when this replica now holds the job's lease. */
  take(jobId: string): Promise<boolean> {
    const { redis, consumer, leaseMs } = this.options;
    return tryLock(redis, this.key(jobId), leaseMs, consumer);
  }

  /** False when the lease is no longer ours (it lapsed and another replica took it). */
  renew(jobId: string): Promise<boolean> {
    const { redis, consumer, leaseMs } = this.options;
    return renewLock(redis, this.key(jobId), leaseMs, consumer);
  }

  /** Hands the job back at once, unless another replica holds it by now. */
  async release(jobId: string): Promise<void> {
    await releaseLock(this.options.redis, this.key(jobId), this.options.consumer);
  }

  private key(jobId: string): string {
    return this.options.keys.lock(`log-archive:${jobId}`);
  }
}
