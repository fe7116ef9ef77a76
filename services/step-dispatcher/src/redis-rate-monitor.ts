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
  /** How often Redis' command total is read (one INFO per master). */
  intervalMs: number;
  /**
   * The time a sandbox's rate is averaged over: a busy sandbox's output comes in bursts (three
   * `seq 200000` at once peaked at ~26,000 stream entries in half a second, ~9,400/s on average),
   * a flood does not let up.
   */
  windowMs: number;
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
 * compares them with the reading one window before: a flood is judged over the window, and
 * stopped within about a window and two intervals of its start (one interval to see Redis busy,
 * one for the reading that closes the window).
 */
export class RedisRateMonitor {
  private readonly loop: PeriodicTask;
  private lastTotal: { total: number; at: number } | undefined;
  /** Readings of the sandboxes' counters since Redis became busy, oldest first. */
  private readings: SandboxRedisCounters[] = [];
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
      this.readings = [];
      return;
    }
    // Lapses a little before the next tick, so the instance that read last can read again (and compare).
    if (!(await tryLock(redis, this.options.lockKey, Math.max(40, intervalMs * 0.8)))) {
      // Another instance reads this round; our readings would leave a gap.
      this.readings = [];
      return;
    }
    await this.measure();
  }

  private async measure(): Promise<void> {
    const { redis, limitPerSecond, intervalMs, windowMs } = this.options;
    const running = new Set(await this.options.runningJobs());
    for (const id of this.stopping) if (!running.has(id)) this.stopping.delete(id);
    const counters = await sandboxRedisCounters(redis, running);
    this.ownCommands += counters.commands + 2; // + the lock and the running index
    this.readings.push(counters);
    // The newest reading at least a window old; older ones are not needed again. One much older
    // than a window (ticks were slow) would average a flood away: the window starts over.
    const start = this.readings.findLastIndex((r) => counters.at - r.at >= windowMs);
    if (start < 0) return;
    const before = this.readings[start] as SandboxRedisCounters;
    this.readings = this.readings.slice(start);
    if (counters.at - before.at > windowMs + intervalMs * 4) {
      this.readings = [counters];
      return;
    }
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
