import { redisUsedMemory, type SandboxRedisUsage, sandboxRedisUsage } from '@sandstream/bus';
import { SandboxRedisMonitor, type SandboxRedisMonitorOptions } from './sandbox-redis-monitor.js';

export interface RedisBudgetMonitorOptions extends SandboxRedisMonitorOptions {
  /** What one sandbox may keep in Redis, all its keys together. */
  budgetBytes: number;
  /**
   * Sandboxes are measured (a SCAN of sandbox keys) at least this often, and sooner whenever
   * Redis grew by half a budget since the last measure: a flood is caught within a tick or two,
   * while a quiet Redis costs one INFO per tick.
   */
  measureEveryMs: number;
  /** Called for a sandbox over its budget (once per sandbox, until it is no longer running). */
  onOverBudget: (usage: SandboxRedisUsage) => Promise<void>;
}

/**
 * A per-sandbox Redis memory budget. ACLs let a sandbox's user write only its own keys but cannot
 * bound how much it writes, so a sandbox could fill Redis for every tenant. Measuring every
 * sandbox every tick would cost a SCAN per tick; instead Redis' total is watched (cheap), and the
 * sandboxes are measured when it grew or on a slower timer. One over its budget is handed to
 * onOverBudget, which cuts it off and frees what it wrote.
 */
export class RedisBudgetMonitor extends SandboxRedisMonitor<number, SandboxRedisUsage> {
  private baseline: number | undefined;
  private measuredAt = 0;
  /** Sandboxes measured by the last round, for the log and tests. */
  lastMeasured = 0;

  constructor(private readonly options: RedisBudgetMonitorOptions) {
    super('redis budget monitor', options, 'budget', options.onOverBudget);
  }

  /** Redis' used memory; measured when it grew by half a budget, or measureEveryMs passed. */
  protected async read(): Promise<number | undefined> {
    const { budgetBytes, measureEveryMs } = this.options;
    const used = await redisUsedMemory(this.options.redis);
    const grew = this.baseline !== undefined && used - this.baseline >= budgetBytes / 2;
    if (!grew && Date.now() - this.measuredAt < measureEveryMs && this.baseline !== undefined) {
      return undefined;
    }
    return used;
  }

  protected lockMs(): number {
    return Math.max(100, this.options.intervalMs);
  }

  protected lockedOut(used: number): void {
    // Another instance measures this round; follow Redis from here so we do not re-trigger on the same growth.
    this.baseline = used;
  }

  protected async measure(running: Set<string>, usedBefore: number): Promise<SandboxRedisUsage[]> {
    const usage = await sandboxRedisUsage(this.options.redis, running);
    this.lastMeasured = usage.size;
    this.measuredAt = Date.now();
    this.baseline = usedBefore;
    return [...usage.values()].filter((entry) => entry.bytes > this.options.budgetBytes);
  }

  protected override async afterStops(): Promise<void> {
    // What was freed should not read as growth next tick, nor what was written before the stop.
    this.baseline = await redisUsedMemory(this.options.redis);
  }
}
