import {
  type RedisClient,
  redisCommandsProcessed,
  type SandboxRedisCounters,
  type SandboxRedisRate,
  sandboxRedisCounters,
  sandboxRedisRates,
  tryLock,
} from '@sandstream/bus';
import { PeriodicTask } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';

export interface RedisRateMonitorOptions {
  redis: RedisClient;
  logger: Logger;
  /** What one sandbox may send Redis per second (see RateSource for what is counted). */
  limitPerSecond: number;
  /** How often Redis' command total is read (one INFO per master); also the measuring window. */
  intervalMs: number;
  /** Jobs whose sandboxes are ours to judge: this namespace's running jobs. */
  runningJobs: () => Promise<string[]>;
  /** One instance measures per round (a short SET NX lock), so replicas do not multiply the readings. */
  lockKey: string;
  /** Called for a sandbox over its rate (once per sandbox, until it is no longer running). */
  onOverRate: (rate: SandboxRedisRate) => Promise<void>;
  onProgress?: () => void;
}

/**
 * A per-sandbox Redis rate limit. A sandbox's user may write only its own keys, but nothing in
 * Redis bounds how fast: one sending XADDs as fast as Redis takes them slows every other tenant's
 * commands, while staying under its memory budget (it trims, or pops what it pushed).
 *
 * Every tick reads Redis' `total_commands_processed` (O(1)): no sandbox can be over the limit
 * while Redis as a whole processed fewer commands than the limit, so while that holds nothing
 * more is read. Above it, each tick reads the sandboxes' counters (sandboxRedisCounters) and
 * compares them with the previous tick's: a flood is judged over one interval, and stopped
 * within about three (one to see Redis busy, two readings one interval apart).
 */
export class RedisRateMonitor {
  private readonly loop: PeriodicTask;
  private lastTotal: { total: number; at: number } | undefined;
  private lastCounters: SandboxRedisCounters | undefined;
  /** Commands the last reading sent itself: they are not a sandbox's. */
  private ownCommands = 0;
  private readonly stopping = new Set<string>();
  /** Rates of the last comparison, for the log and tests. */
  lastRates: SandboxRedisRate[] = [];

  constructor(private readonly options: RedisRateMonitorOptions) {
    this.loop = new PeriodicTask(() => this.tick(), options.intervalMs, {
      name: 'redis rate monitor',
      logger: options.logger,
      onProgress: options.onProgress,
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  async tick(): Promise<void> {
    const { redis, limitPerSecond, intervalMs } = this.options;
    const now = { total: await redisCommandsProcessed(redis), at: Date.now() };
    const last = this.lastTotal;
    this.lastTotal = now;
    const own = this.ownCommands;
    this.ownCommands = 0;
    if (!last || now.at <= last.at) return;
    const perSecond = ((now.total - last.total - own) * 1000) / (now.at - last.at);
    if (perSecond <= limitPerSecond) {
      this.lastCounters = undefined;
      return;
    }
    // Lapses a little before the next tick, so the instance that read last can read again (and compare).
    if (!(await tryLock(redis, this.options.lockKey, Math.max(40, intervalMs * 0.8)))) {
      // Another instance reads this round; an old reading of ours would only widen a later window.
      this.lastCounters = undefined;
      return;
    }
    await this.measure();
  }

  private async measure(): Promise<void> {
    const { redis, limitPerSecond, intervalMs } = this.options;
    const running = new Set(await this.options.runningJobs());
    for (const id of this.stopping) if (!running.has(id)) this.stopping.delete(id);
    const counters = await sandboxRedisCounters(redis, running);
    this.ownCommands += counters.commands + 2; // + the lock and the running index
    const before = this.lastCounters;
    this.lastCounters = counters;
    // A reading much older than an interval (ticks were skipped) would average a flood away.
    if (!before || counters.at - before.at > intervalMs * 4) return;
    this.lastRates = sandboxRedisRates(before, counters);
    for (const rate of this.lastRates) {
      if (rate.perSecond <= limitPerSecond || this.stopping.has(rate.jobId)) continue;
      this.stopping.add(rate.jobId);
      try {
        await this.options.onOverRate(rate);
      } catch (err) {
        // Tried again at the next reading.
        this.stopping.delete(rate.jobId);
        this.options.logger.error(
          { err, jobId: rate.jobId },
          'stopping a sandbox over its Redis rate failed',
        );
      }
    }
  }
}
