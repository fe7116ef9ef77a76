import type { SandboxBackend, SandboxDiskUsage, SandboxRef, VolumeUsage } from './backend.js';

/** The reason a sandbox stopped for its disk: the prefix `disk-budget` is what callers match. */
export const DISK_BUDGET = 'disk-budget';

export function diskBudgetReason(usage: SandboxDiskUsage): string {
  const mb = (n: number) => `${(n / (1024 * 1024)).toLocaleString('en-US', { maximumFractionDigits: 1 })} MB`;
  const parts = Object.entries(usage.parts)
    .map(([part, bytes]) => `${part} ${mb(bytes)}`)
    .join(', ');
  return `${DISK_BUDGET}: the sandbox wrote ${mb(usage.usedBytes)} to disk (${parts}), over its limit of ${mb(usage.limitBytes)} (resources.limits.ephemeralStorage, SANDBOX_DEFAULT_DISK); it was stopped`;
}

export function volumeBudgetReason(volume: VolumeUsage): string {
  const mb = (n: number) => `${(n / (1024 * 1024)).toLocaleString('en-US', { maximumFractionDigits: 1 })} MB`;
  return `${DISK_BUDGET}: volume ${volume.volume} holds ${mb(volume.usedBytes)}, over its sizeLimitBytes of ${mb(volume.limitBytes)}; the sandbox writing it was stopped`;
}

export function isDiskBudgetReason(reason: string | undefined): boolean {
  return reason?.startsWith(DISK_BUDGET) ?? false;
}

export interface DiskBudgetWatchOptions {
  backend: SandboxBackend;
  /**
   * Time between two rounds. A sandbox writing at R bytes/s is stopped at most R × (interval +
   * one round's measure and halt) past its limit (docs/sandbox-backends.md, "Disk").
   */
  intervalMs: number;
  /**
   * Longest pause while no sandbox runs (rounds back off from `intervalMs` up to it; default
   * `intervalMs`). wake() when a sandbox starts: it is measured from its first round.
   */
  idleMaxMs?: number;
  /** After the sandbox was halted: fail its job and destroy it (pod-lifecycle queues a destroy). */
  onOverBudget: (ref: SandboxRef, usage: SandboxDiskUsage, reason: string) => Promise<void>;
  /** Every measure, for metrics and tests. */
  onMeasured?: (ref: SandboxRef, usage: SandboxDiskUsage) => void;
  onError?: (err: unknown, ref: SandboxRef | undefined) => void;
}

/**
 * The disk budget where no engine enforces one: every round lists the backend's running
 * sandboxes (labels, so any replica sees every sandbox) and measures each; one past its limit is
 * halted at once (its writes stop before anything else happens), then handed to onOverBudget.
 * Runs in the backend's owner (pod-lifecycle): nothing else drives a backend.
 */
export class DiskBudgetWatch {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = true;
  /** Halted and handed over; kept until the sandbox leaves the list, so it is stopped once. */
  private readonly stopping = new Set<string>();
  /** Rounds in a row that found no sandbox running. */
  private idleRounds = 0;
  /** wake() was called: the next pause is the short one, whatever the round in flight finds. */
  private woken = false;
  private timerAt = 0;

  constructor(private readonly options: DiskBudgetWatchOptions) {}

  start(): void {
    if (!this.options.backend.diskUsage) return;
    this.stopped = false;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** A sandbox started: the next round within `intervalMs`, however long the watch rested. */
  wake(): void {
    this.woken = true;
    if (this.stopped || this.running !== undefined) return;
    if (this.timerAt - Date.now() > this.options.intervalMs) this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    const { intervalMs, idleMaxMs = intervalMs } = this.options;
    const idleRounds = this.woken ? 0 : this.idleRounds;
    this.woken = false;
    const pause = Math.min(intervalMs * 2 ** Math.min(idleRounds, 16), Math.max(idleMaxMs, intervalMs));
    this.timerAt = Date.now() + pause;
    this.timer = setTimeout(() => {
      this.running = this.check()
        .catch((err: unknown) => this.options.onError?.(err, undefined))
        .finally(() => {
          this.running = undefined;
          this.schedule();
        });
    }, pause);
    this.timer.unref();
  }

  /** One round: measure every running sandbox, stop those past their limit. */
  async check(): Promise<void> {
    const { backend } = this.options;
    if (!backend.diskUsage) return;
    const listed = (await backend.list()).filter((s) => s.state === 'running' || s.state === 'starting');
    this.idleRounds = listed.length === 0 ? this.idleRounds + 1 : 0;
    const live = new Set(listed.map((s) => s.id));
    for (const id of this.stopping) if (!live.has(id)) this.stopping.delete(id);
    // One at a time: a round costs one walk at once, never a burst of them on a busy host.
    for (const info of listed) {
      if (this.stopping.has(info.id)) continue;
      const ref: SandboxRef = { jobId: info.jobId, backend: info.backend, id: info.id };
      try {
        const usage = await backend.diskUsage(ref);
        if (usage?.enforcement !== 'watch') continue;
        this.options.onMeasured?.(ref, usage);
        const fullVolume = usage.volumes?.find((v) => v.usedBytes > v.limitBytes);
        if (usage.usedBytes <= usage.limitBytes && !fullVolume) continue;
        this.stopping.add(info.id);
        await backend.halt?.(ref);
        await this.options.onOverBudget(
          ref,
          usage,
          fullVolume ? volumeBudgetReason(fullVolume) : diskBudgetReason(usage),
        );
      } catch (err) {
        // Measured again next round (a halted sandbox no longer grows; its stop is retried).
        this.stopping.delete(info.id);
        this.options.onError?.(err, ref);
      }
    }
  }
}
