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
 * Runs `run` every `intervalMs`, never two runs at once: a tick that comes while the previous
 * run is still going is skipped, so a slow Redis does not pile up sweeps. stop() clears the
 * timer and waits for the run in flight, so nothing touches Redis after the service closes it.
 *
 * A run that rejects never escapes as an unhandled rejection (that would end the process during
 * a Redis outage): it is logged once per streak of failures, and the next runs back off
 * (interval doubling per failure, up to maxBackoffMs) until one succeeds again.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  private failures = 0;
  private notBefore = 0;

  constructor(
    private readonly run: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly options: PeriodicTaskOptions = {},
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.running !== undefined || this.stopped || Date.now() < this.notBefore) return;
      this.running = this.run()
        .then(
          () => this.succeeded(),
          (err: unknown) => this.failed(err),
        )
        .finally(() => {
          this.running = undefined;
        });
    }, this.intervalMs);
  }

  private succeeded(): void {
    if (this.failures > 0) {
      this.options.logger?.info(
        { task: this.options.name, failures: this.failures },
        'periodic task recovered',
      );
    }
    this.failures = 0;
    this.notBefore = 0;
    this.options.onProgress?.();
  }

  private failed(err: unknown): void {
    this.failures++;
    if (this.failures === 1) {
      this.options.logger?.warn(
        { task: this.options.name, err: err instanceof Error ? err.message : String(err) },
        'periodic task failed; retrying with backoff',
      );
    }
    const backoff = Math.min(
      this.intervalMs * 2 ** Math.min(this.failures, 16),
      this.options.maxBackoffMs ?? 5000,
    );
    this.notBefore = Date.now() + backoff;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
