import type { KeySpace, RedisClient } from '@sandstream/bus';
import { LOG_ARCHIVE_LEASE_RELEASE, LOG_ARCHIVE_LEASE_RENEW } from './reap-scripts.js';

/**
 * Per-job leases: a job is archived by whichever replica holds its lease. The owner renews it
 * every tick; a dead replica's lease lapses after `leaseMs` and its jobs move.
 */
export class ArchiveLeases {
  constructor(
    private readonly options: { redis: RedisClient; keys: KeySpace; consumer: string; leaseMs: number },
  ) {}

  /** True when this replica now holds the job's lease. */
  async take(jobId: string): Promise<boolean> {
    const { redis, consumer, leaseMs } = this.options;
    return (await redis.set(this.key(jobId), consumer, 'PX', leaseMs, 'NX')) === 'OK';
  }

  /** False when the lease is no longer ours (it lapsed and another replica took it). */
  async renew(jobId: string): Promise<boolean> {
    const { redis, consumer, leaseMs } = this.options;
    return (await LOG_ARCHIVE_LEASE_RENEW.run<number>(redis, [this.key(jobId)], [consumer, leaseMs])) === 1;
  }

  /** Hands the job back at once, unless another replica holds it by now. */
  async release(jobId: string): Promise<void> {
    await LOG_ARCHIVE_LEASE_RELEASE.run(this.options.redis, [this.key(jobId)], [this.options.consumer]);
  }

  private key(jobId: string): string {
    return this.options.keys.lock(`log-archive:${jobId}`);
  }
}
