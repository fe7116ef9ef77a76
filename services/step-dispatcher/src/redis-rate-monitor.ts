import {
  redisCommandsProcessed,
  type SandboxRedisCounters,
  type SandboxRedisRate,
  sandboxRedisCounters,
  sandboxRedisRates,
} from '@sandstream/bus';
import { SandboxRedisMonitor, type SandboxRedisMonitorOptions } from './sandbox-redis-monitor.js';

export interface RedisRateMonitorOptions extends SandboxRedisMonitorOptions {
  /** What one sandbox may send Redis per second (see RateSource for what is counted). */
  limitPerSecond: number;
  /**
   * The time a sandbox's rate is averaged over: a busy sandbox's output comes in bursts (three
   * `seq 200000` at once peaked at ~26,000 stream entries in half a second, ~9,400/s on average),
   * a flood does not let up.
   */
  windowMs: number;
  /** Called for a sandbox over its rate (once per sandbox, until it is no longer running). */
  onOverRate: (rate: SandboxRedisRate) => Promise<void>;
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
export class RedisRateMonitor extends SandboxRedisMonitor<true, SandboxRedisRate> {
  private lastTotal: { total: number; at: number } | undefined;
  /** Readings of the sandboxes' counters since Redis became busy, oldest first. */
  private readings: SandboxRedisCounters[] = [];
  /** Commands the last reading sent itself: they are not a sandbox's. */
  private ownCommands = 0;
  /** Rates of the last comparison, for the log and tests. */
  lastRates: SandboxRedisRate[] = [];

  constructor(private readonly options: RedisRateMonitorOptions) {
    super('redis rate monitor', options, 'rate', options.onOverRate);
  }

  /** Redis' command total; the sandboxes are read while Redis as a whole is over the limit. */
  protected async read(): Promise<true | undefined> {
    const { redis, limitPerSecond } = this.options;
    const now = { total: await redisCommandsProcessed(redis), at: Date.now() };
    const last = this.lastTotal;
    this.lastTotal = now;
    const own = this.ownCommands;
    this.ownCommands = 0;
    if (!last || now.at <= last.at) return undefined;
    const perSecond = ((now.total - last.total - own) * 1000) / (now.at - last.at);
    if (perSecond <= limitPerSecond) {
      this.readings = [];
      return undefined;
    }
    return true;
  }

  protected override rested(): void {
    // A total read before the rest would average the idle time into the next rate.
    this.lastTotal = undefined;
    this.readings = [];
  }

  protected lockMs(): number {
    // Lapses a little before the next tick, so the instance that read last can read again (and compare).
    return Math.max(40, this.options.intervalMs * 0.8);
  }

  protected lockedOut(): void {
    // Another instance reads this round; our readings would leave a gap.
    this.readings = [];
  }

  protected async measure(running: Set<string>): Promise<SandboxRedisRate[]> {
    const { redis, limitPerSecond, intervalMs, windowMs } = this.options;
    const counters = await sandboxRedisCounters(redis, running);
    this.ownCommands += counters.commands + 2; // + the lock and the running index
    this.readings.push(counters);
    // The newest reading at least a window old; older ones are not needed again. One much older
    // than a window (ticks were slow) would average a flood away: the window starts over.
    const start = this.readings.findLastIndex((r) => counters.at - r.at >= windowMs);
    if (start < 0) return [];
    const before = this.readings[start] as SandboxRedisCounters;
    this.readings = this.readings.slice(start);
    if (counters.at - before.at > windowMs + intervalMs * 4) {
      this.readings = [counters];
      return [];
    }
    this.lastRates = sandboxRedisRates(before, counters);
    return this.lastRates.filter((rate) => rate.perSecond > limitPerSecond);
  }
}
