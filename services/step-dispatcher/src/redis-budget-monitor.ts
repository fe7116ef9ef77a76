import {
  type RedisClient,
  redisUsedMemory,
  type SandboxRedisUsage,
  sandboxRedisUsage,
  tryLock,
} from '@sandstream/bus';
import { PeriodicTask } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';

export interface RedisBudgetMonitorOptions {
  redis: RedisClient;
  logger: Logger;
  /** What one sandbox may keep in Redis, all its keys together. */
  budgetBytes: number;
  /** How often Redis' used memory is read (one INFO per master). */
  intervalMs: number;
  /**
   * Sandboxes are measured (a SCAN of sandbox keys) at least this often, and sooner whenever
   * Redis grew by half a budget since the last measure: a flood is caught within a tick or two,
   * while a quiet Redis costs one INFO per tick.
   */
  measureEveryMs: number;
  /** Jobs whose sandboxes are ours to judge: this namespace's running jobs. */
  runningJobs: () => Promise<string[]>;
  /** Only one instance measures per round (a short SET NX lock), so replicas do not multiply the SCANs. */
  lockKey: string;
  /** Called for a sandbox over its budget (once per sandbox, until it is no longer running). */
  onOverBudget: (usage: SandboxRedisUsage) => Promise<void>;
  onProgress?: () => void;
}

/**
 * A per-sandbox Redis memory budget. ACLs let a sandbox's user write only its own keys but cannot
 * bound how much it writes, so a sandbox could fill Redis for every tenant. Measuring every
 * sandbox every tick would cost a SCAN per tick; instead Redis' total is watched (cheap), and the
 * sandboxes are measured when it grew or on a slower timer. One over its budget is handed to
 * onOverBudget, which cuts it off and frees what it wrote.
 */
export class RedisBudgetMonitor {
  private readonly loop: PeriodicTask;
  private baseline: number | undefined;
  private measuredAt = 0;
  private readonly stopping = new Set<string>();
  /** Sandboxes measured by the last round, for the log and tests. */
  lastMeasured = 0;

  constructor(private readonly options: RedisBudgetMonitorOptions) {
    this.loop = new PeriodicTask(() => this.tick(), options.intervalMs, {
      name: 'redis budget monitor',
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
    const { redis, budgetBytes, measureEveryMs } = this.options;
    const used = await redisUsedMemory(redis);
    const grew = this.baseline !== undefined && used - this.baseline >= budgetBytes / 2;
    if (!grew && Date.now() - this.measuredAt < measureEveryMs && this.baseline !== undefined) return;
    if (!(await tryLock(redis, this.options.lockKey, Math.max(100, this.options.intervalMs)))) {
      // Another instance measures this round; follow Redis from here so we do not re-trigger on the same growth.
      this.baseline = used;
      return;
    }
    await this.measure(used);
  }

  private async measure(usedBefore: number): Promise<void> {
    const { redis, budgetBytes } = this.options;
    const running = new Set(await this.options.runningJobs());
    for (const id of this.stopping) if (!running.has(id)) this.stopping.delete(id);
    const usage = await sandboxRedisUsage(redis, running);
    this.lastMeasured = usage.size;
    this.measuredAt = Date.now();
    this.baseline = usedBefore;
    for (const entry of usage.values()) {
      if (entry.bytes <= budgetBytes || this.stopping.has(entry.jobId)) continue;
      this.stopping.add(entry.jobId);
      try {
        await this.options.onOverBudget(entry);
      } catch (err) {
        // Tried again at the next measure.
        this.stopping.delete(entry.jobId);
        this.options.logger.error(
          { err, jobId: entry.jobId },
          'stopping a sandbox over its Redis budget failed',
        );
      }
    }
    // What was freed should not read as growth next tick, nor what was written before the stop.
    this.baseline = await redisUsedMemory(redis);
  }
}
