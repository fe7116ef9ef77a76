import { type RedisClient, tryLock } from '@sandstream/bus';
import { PeriodicWorker, type RoundOutcome } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';

/** What every per-sandbox Redis monitor is given (the budget's and the rate's). */
export interface SandboxRedisMonitorOptions {
  redis: RedisClient;
  logger: Logger;
  /** How often Redis as a whole is read (one INFO per master). */
  intervalMs: number;
  /** Jobs whose sandboxes are ours to judge: this namespace's running jobs. */
  runningJobs: () => Promise<string[]>;
  /** One instance measures per round (a short SET NX lock), so replicas do not multiply the readings. */
  lockKey: string;
  onProgress?: () => void;
  /**
   * Whether any job runs (RunningProbe): only running jobs' sandboxes are ever measured, so while
   * none runs the round reads nothing and the loop rests, up to `idleMaxMs` between rounds
   * (wake() when this process starts a job). Absent: every round reads.
   */
  anyRunning?: () => Promise<boolean>;
  idleMaxMs?: number;
}

/**
 * The round of a per-sandbox Redis monitor: a cheap reading of Redis as a whole, and only when it
 * calls for one, a measure of the sandboxes by the one instance that holds the round's lock; each
 * sandbox found over its limit is handed to `onOver` once, until it is no longer running (a stop
 * that failed is tried again at the next measure). Each monitor says what it reads and measures.
 */
export abstract class SandboxRedisMonitor<Reading, Over extends { jobId: string }> extends PeriodicWorker {
  private readonly stopping = new Set<string>();

  constructor(
    name: string,
    private readonly base: SandboxRedisMonitorOptions,
    /** What is over: named in the log line of a stop that failed. */
    private readonly limitName: string,
    private readonly onOver: (over: Over) => Promise<void>,
  ) {
    super(name, base.intervalMs, base);
  }

  /** Redis as a whole, read cheaply; undefined when the sandboxes need not be measured this round. */
  protected abstract read(): Promise<Reading | undefined>;
  /** How long the round's lock is held. */
  protected abstract lockMs(): number;
  /** Another instance measures this round. */
  protected abstract lockedOut(reading: Reading): void;
  /** The sandboxes of `running` over their limit. */
  protected abstract measure(running: Set<string>, reading: Reading): Promise<Over[]>;
  /** After the stops of a measure. */
  protected async afterStops(): Promise<void> {}
  /** Rounds rest while nothing runs: what was read before is stale when they resume. */
  protected rested(): void {}

  async tick(): Promise<RoundOutcome> {
    if (this.base.anyRunning && !(await this.base.anyRunning())) {
      this.stopping.clear();
      this.rested();
      return 'idle';
    }
    const reading = await this.read();
    if (reading === undefined) return 'busy';
    if (!(await tryLock(this.base.redis, this.base.lockKey, this.lockMs()))) {
      this.lockedOut(reading);
      return 'busy';
    }
    const running = new Set(await this.base.runningJobs());
    for (const id of this.stopping) if (!running.has(id)) this.stopping.delete(id);
    for (const over of await this.measure(running, reading)) {
      if (this.stopping.has(over.jobId)) continue;
      this.stopping.add(over.jobId);
      try {
        await this.onOver(over);
      } catch (err) {
        // Tried again at the next measure.
        this.stopping.delete(over.jobId);
        this.base.logger.error(
          { err, jobId: over.jobId },
          `stopping a sandbox over its Redis ${this.limitName} failed`,
        );
      }
    }
    await this.afterStops();
    return 'busy';
  }
}
