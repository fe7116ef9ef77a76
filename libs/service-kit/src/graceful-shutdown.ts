import type { Logger } from '@sandstream/telemetry';

export interface ShutdownStep {
  name: string;
  run: () => Promise<void>;
}

export interface GracefulShutdownOptions {
  logger: Logger;
  /** After this, remaining steps are abandoned and the process exits 1 (an orchestrator would SIGKILL anyway). */
  timeoutMs?: number;
  /** Injectable for tests; defaults to process.exit. */
  exit?: (code: number) => void;
  signals?: NodeJS.Signals[];
}

/**
 * Ordered teardown on SIGTERM / SIGINT. Steps run in registration order (register "stop taking
 * work" first, "close connections" last), each awaited, so in-flight work finishes before the
 * connections it needs are closed. A second signal does not start a second teardown.
 */
export class GracefulShutdown {
  private readonly steps: ShutdownStep[] = [];
  private running: Promise<void> | undefined;
  private readonly controller = new AbortController();

  constructor(private readonly options: GracefulShutdownOptions) {
    for (const signal of options.signals ?? ['SIGTERM', 'SIGINT']) {
      process.once(signal, () => {
        options.logger.info({ signal }, 'shutdown signal received');
        void this.shutdown(0);
      });
    }
  }

  /** Aborted when shutdown begins: background loops watch it to stop. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  add(name: string, run: () => Promise<void>): void {
    this.steps.push({ name, run });
  }

  shutdown(code = 0): Promise<void> {
    if (this.running) return this.running;
    this.controller.abort();
    const { logger } = this.options;
    const exit = this.options.exit ?? ((c: number) => process.exit(c));
    const timeoutMs = this.options.timeoutMs ?? 30_000;
    this.running = (async () => {
      const timer = setTimeout(() => {
        logger.error({ timeoutMs }, 'shutdown timed out; exiting with work unfinished');
        exit(1);
      }, timeoutMs);
      timer.unref();
      let failed = false;
      for (const step of this.steps) {
        const started = Date.now();
        try {
          await step.run();
          logger.info({ step: step.name, ms: Date.now() - started }, 'shutdown step done');
        } catch (err) {
          failed = true;
          logger.error({ step: step.name, err }, 'shutdown step failed');
        }
      }
      clearTimeout(timer);
      logger.flush?.();
      exit(failed ? 1 : code);
    })();
    return this.running;
  }
}
