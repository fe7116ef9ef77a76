import { type Deadline, type DispatchKeys, parseDeadlineMember, type RedisClient } from '@sandstream/bus';
import { AdaptiveTask, type RoundOutcome } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';
import { claimDueScript } from './dispatch-scripts.js';

export interface DeadlineSweeperOptions {
  redis: RedisClient;
  keys: DispatchKeys;
  logger: Logger;
  /** Handles a due deadline; a returned time (epoch ms) keeps the deadline, due again then. */
  handle: (deadline: Deadline) => Promise<number | undefined>;
  /** Pause after a sweep that claimed a full batch (more may be due at once). */
  intervalMs?: number;
  /**
   * Longest sleep: the sweeper sleeps until the earliest deadline in Redis, and deadlines this
   * process sets wake it (wake()); one set by another instance that died before its own sweeper
   * saw it is seen within this long.
   */
  idleMaxMs?: number;
  leaseMs?: number;
  batchSize?: number;
  /** Called after every completed sweep (see ProgressWatchdog). */
  onProgress?: () => void;
}

/**
 * One timer for every deadline of every job, instead of a timer per job. It sleeps until the
 * earliest deadline of any shard (each claim answers it), not a fixed 250 ms: an idle dispatcher
 * used to spend most of its CPU on sweeps that found nothing (docs/benchmarks.md, issue 32).
 */
export class DeadlineSweeper {
  private readonly loop: AdaptiveTask;

  constructor(private readonly options: DeadlineSweeperOptions) {
    this.loop = new AdaptiveTask(() => this.sweep(), {
      intervalMs: this.options.intervalMs ?? 250,
      idleMaxMs: this.options.idleMaxMs ?? 5000,
      // A deadline due now that another instance holds (leased) must not make a busy loop.
      minPauseMs: 10,
      name: 'deadline sweep',
      logger: options.logger,
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
  }

  start(): void {
    this.loop.start();
  }

  /** A deadline was set (or moved) to `at` by this process: the sweeper is due then at the latest. */
  wake(at: number): void {
    this.loop.wake(at);
  }

  async sweep(): Promise<RoundOutcome> {
    const { redis, keys, logger } = this.options;
    const leaseMs = this.options.leaseMs ?? 30_000;
    const batch = this.options.batchSize ?? 500;
    // Every shard's claim at once: the auto-pipeline sends them in one write, so an idle sweep
    // costs one round trip rather than one per shard (most of an idle dispatcher's CPU).
    const now = Date.now();
    const shards = keys.allShards().map((shard) => keys.deadlines(shard));
    const claimed = await Promise.allSettled(
      shards.map((key) =>
        claimDueScript.run<[string[], string | null]>(redis, [key], [now, now + leaseMs, batch]),
      ),
    );
    let full = false;
    let nextAt = Number.POSITIVE_INFINITY;
    for (const [i, key] of shards.entries()) {
      const claim = claimed[i];
      // What another shard claimed is still handled now, not left to its lease.
      if (claim?.status !== 'fulfilled') continue;
      const [due, earliest] = claim.value;
      if (earliest !== null) nextAt = Math.min(nextAt, Number(earliest));
      if (due.length >= batch) full = true;
      await Promise.all(
        due.map(async (member) => {
          const deadline = parseDeadlineMember(member);
          try {
            const again = deadline ? await this.options.handle(deadline) : undefined;
            if (again === undefined) await redis.zrem(key, member);
            else {
              // XX: a deadline the job's end removed meanwhile stays removed.
              await redis.zadd(key, 'XX', again, member);
              nextAt = Math.min(nextAt, again);
            }
          } catch (err) {
            logger.error({ err, member }, 'deadline handler failed; retried after the lease');
          }
        }),
      );
    }
    // A failure rejects the sweep: the periodic task backs off and logs once per outage.
    const failed = claimed.find((claim) => claim.status === 'rejected');
    if (failed) throw failed.reason;
    if (full) return 'busy';
    return Number.isFinite(nextAt) ? { nextAt } : 'idle';
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
