import { PeriodicTask, type TaskLogger } from './periodic-task.js';

export interface PeriodicWorkerOptions {
  logger?: TaskLogger;
  /** Called after every round that resolved (see ProgressWatchdog). */
  onProgress?: () => void;
}

/**
 * A service part that does one round every `intervalMs` on a PeriodicTask (never two at once,
 * failures backed off): start() and stop() are the task's, tick() is the round, public so that
 * tests can drive rounds one at a time. One place for the loop, so each part holds only its round.
 */
export abstract class PeriodicWorker {
  private readonly loop: PeriodicTask;

  constructor(name: string, intervalMs: number, options: PeriodicWorkerOptions) {
    this.loop = new PeriodicTask(() => this.tick(), intervalMs, {
      name,
      logger: options.logger,
      onProgress: options.onProgress,
    });
  }

  abstract tick(): Promise<void>;

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
