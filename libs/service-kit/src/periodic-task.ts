import { AdaptiveTask } from './adaptive-task.js';

/** The two log levels a task uses (a pino Logger fits). */
export interface TaskLogger {
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
}

export interface PeriodicTaskOptions {
  /** Named in the log lines about failures and recovery. */
  name?: string;
  logger?: TaskLogger;
  /** Called after every run that resolved: the loop made progress (see ProgressWatchdog). */
  onProgress?: () => void;
  /** Upper bound of the pause after consecutive failures (default 5 s). */
  maxBackoffMs?: number;
}

/**
 * Runs `run` every `intervalMs`, never two runs at once: the next run is due `intervalMs` after
 * the previous one ended, so a slow Redis does not pile up sweeps. stop() clears the timer and
 * waits for the run in flight, so nothing touches Redis after the service closes it.
 *
 * A run that rejects never escapes as an unhandled rejection (that would end the process during
 * a Redis outage): it is logged once per streak of failures, and the next runs back off
 * (interval doubling per failure, up to maxBackoffMs) until one succeeds again. An AdaptiveTask
 * whose every round is busy: one loop, one set of those rules.
 */
export class PeriodicTask {
  private readonly task: AdaptiveTask;

  constructor(run: () => Promise<void>, intervalMs: number, options: PeriodicTaskOptions = {}) {
    this.task = new AdaptiveTask(
      async () => {
        await run();
        return 'busy';
      },
      { ...options, intervalMs, idleMaxMs: intervalMs },
    );
  }

  start(): void {
    this.task.start();
  }

  stop(): Promise<void> {
    return this.task.stop();
  }
}
