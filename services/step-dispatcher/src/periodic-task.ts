/**
 * Runs `run` every `intervalMs`, never two runs at once: a tick that comes while the previous
 * run is still going is skipped, so a slow Redis does not pile up sweeps. stop() clears the
 * timer and waits for the run in flight, so nothing touches Redis after the service closes it.
 */
export class PeriodicTask {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(
    private readonly run: () => Promise<void>,
    private readonly intervalMs: number,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.running === undefined && !this.stopped) {
        this.running = this.run().finally(() => {
          this.running = undefined;
        });
      }
    }, this.intervalMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
