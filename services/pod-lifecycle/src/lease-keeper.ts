import { isTerminal, type JobStore, type LeaseRenewal } from '@sandstream/bus';
import { sleep } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';

export interface LeaseKeeperOptions {
  leases: LeaseRenewal;
  store: JobStore;
  logger: Logger;
  /** Renewal period; a third of the lease length leaves two missed rounds of slack. */
  intervalMs: number;
  /** Called after every completed pass (see ProgressWatchdog). */
  onProgress?: () => void;
}

/**
 * Renews the slot lease of every job that still lives (not terminal), so a lease lapses only
 * when no pod-lifecycle replica runs at all or the job is gone. Each replica may run one:
 * renewals are idempotent. Leases of finished jobs are not renewed; destroy frees them and, if
 * a destroy was lost, they lapse and the reaper reclaims them.
 */
export class LeaseKeeper {
  private readonly controller = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(private readonly options: LeaseKeeperOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
  }

  /** One pass; returns how many leases were renewed. */
  async renewAll(): Promise<number> {
    const { leases, store } = this.options;
    let renewed = 0;
    for (const { holder } of await leases.holders()) {
      const record = await store.get(holder);
      if (!record || isTerminal(record.state)) continue;
      if (await leases.renew(holder, record.tenant)) renewed++;
      else {
        // Lapsed while the job lives (no pod-lifecycle ran for a whole lease length): the job
        // goes on, but its slot may now be someone else's — say so, it means over-admission.
        this.options.logger.warn(
          { jobId: holder, state: record.state },
          'slot lease of a live job had lapsed',
        );
      }
    }
    return renewed;
  }

  private async run(): Promise<void> {
    const signal = this.controller.signal;
    let failures = 0;
    while (!signal.aborted) {
      let pause = this.options.intervalMs;
      try {
        await this.renewAll();
        if (failures > 0) this.options.logger.info({ failures }, 'lease renewal works again');
        failures = 0;
        this.options.onProgress?.();
      } catch (err) {
        // One line per outage, not one per pass; retry sooner than a full interval, at most every 5 s.
        if (failures === 0)
          this.options.logger.warn({ err: (err as Error).message }, 'lease renewal pass failed');
        failures++;
        pause = Math.min(pause, 1000 * failures, 5000);
      }
      await sleep(pause, signal);
    }
  }
}
