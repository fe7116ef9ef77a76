import { AdaptiveTask, type RoundOutcome } from './adaptive-task.js';
import type { TaskLogger } from './periodic-task.js';

export interface PeriodicWorkerOptions {
  logger?: TaskLogger;
  /** Called after every round that resolved (see ProgressWatchdog). */
  onProgress?: () => void;
  /**
   * Longest pause between rounds that answer `idle` (they back off from the interval up to it);
   * default: the interval, i.e. a fixed pace.
   */
  idleMaxMs?: number;
}

/**
 * A service part that does one round every `intervalMs` on an AdaptiveTask (never two at once,
 * failures backed off): start(), stop() and wake() are the task's, tick() is the round, public so
 * that tests can drive rounds one at a time. A round that answers `idle` lets the loop rest (up to
 * `idleMaxMs`) until wake() or a later round finds work. One place for the loop, so each part
 * holds only its round.
 */
export abstract class PeriodicWorker {
  private readonly loop: AdaptiveTask;

  constructor(name: string, intervalMs: number, options: PeriodicWorkerOptions) {
    this.loop = new AdaptiveTask(() => this.tick(), {
      intervalMs,
      idleMaxMs: Math.max(intervalMs, options.idleMaxMs ?? intervalMs),
      name,
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.onProgress ? { onProgress: options.onProgress } : {}),
    });
  }

  /** One round: `busy` keeps the pace, `idle` when it found nothing to do (the loop may rest longer). */
  abstract tick(): Promise<RoundOutcome>;

  start(): void {
    this.loop.start();
  }

  /** The next round now (work appeared in this process). */
  wake(): void {
    this.loop.wake();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
