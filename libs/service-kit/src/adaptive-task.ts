import type { PeriodicTaskOptions } from './periodic-task.js';

/**
 * What a round of an AdaptiveTask found, which sets the pause before the next one:
 * - `busy`: it did work, more may follow: the next round after `intervalMs`;
 * - `idle`: nothing to do: the pause doubles per idle round, from `intervalMs` up to `idleMaxMs`;
 * - `{ nextAt }`: the next work is due then (epoch ms): the next round then, within
 *   [`minPauseMs`, `idleMaxMs`].
 */
export type RoundOutcome = 'busy' | 'idle' | { nextAt: number };

export interface AdaptiveTaskOptions extends PeriodicTaskOptions {
  /** Pause after a busy round, and the first pause of an idle streak. */
  intervalMs: number;
  /**
   * Longest pause: the bound on how late a round notices work nobody woke it for (work made by
   * another replica, or a wake-up that was lost).
   */
  idleMaxMs: number;
  /** Shortest pause before a round due at `nextAt` (default 0). */
  minPauseMs?: number;
}

/**
 * A loop whose pace follows its work, for the services' polls: an idle service used to wake up
 * several times a second to find nothing (issue 32: 6–12 ms of CPU a second per idle service).
 * Rounds that find nothing back off up to `idleMaxMs`; whoever makes work in this process calls
 * wake() (or wake(at) for work due later), which brings the next round forward at once, so work
 * made here is never waited for. Like PeriodicTask: never two rounds at once, a round that rejects
 * is logged once per streak and backed off (never an unhandled rejection), stop() waits for the
 * round in flight and no round starts after it.
 */
/**
 * Pauses of at least this long end on a multiple of it (wall clock), so the idle loops of one
 * process — and their Redis replies — wake it together instead of each on its own: an idle
 * service's CPU is mostly the kernel's and Node's cost per wake-up, not the rounds' work (issue 32
 * §3: the idle step-dispatcher woke ~2 times a second at ~0.6 ms each). A round gets at most this
 * much later; rounds due at a time (`nextAt`), woken ones and short pauses are never moved.
 */
export const ALIGN_PAUSES_MS = 1000;

/** `at`, moved to the next multiple of ALIGN_PAUSES_MS when the pause to it is long enough. */
export function alignedWake(at: number, now: number): number {
  return at - now >= ALIGN_PAUSES_MS ? Math.ceil(at / ALIGN_PAUSES_MS) * ALIGN_PAUSES_MS : at;
}

export class AdaptiveTask {
  private timer: NodeJS.Timeout | undefined;
  /** When the pending timer fires (epoch ms); undefined while a round runs or before start. */
  private timerAt: number | undefined;
  private running: Promise<void> | undefined;
  /** A wake-up that came while a round ran: the next round no later than this. */
  private wakeAt: number | undefined;
  private stopped = true;
  private failures = 0;
  private idleRounds = 0;

  constructor(
    private readonly run: () => Promise<RoundOutcome>,
    private readonly options: AdaptiveTaskOptions,
  ) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    const now = Date.now();
    this.schedule(alignedWake(now + this.options.intervalMs, now));
  }

  /** The next round no later than `at` (default: now). */
  wake(at: number = Date.now()): void {
    if (this.stopped) return;
    if (this.running !== undefined) {
      this.wakeAt = Math.min(this.wakeAt ?? at, at);
      return;
    }
    if (this.timerAt === undefined || at < this.timerAt) this.schedule(at);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timerAt = undefined;
    await this.running;
  }

  private schedule(at: number): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timerAt = at;
    this.timer = setTimeout(() => this.round(), Math.max(0, at - Date.now()));
  }

  private round(): void {
    this.timerAt = undefined;
    this.wakeAt = undefined;
    this.running = this.run()
      .then(
        (outcome) => this.succeeded(outcome),
        (err: unknown) => this.failed(err),
      )
      .then((next) => {
        this.running = undefined;
        const woken = this.wakeAt;
        this.wakeAt = undefined;
        this.schedule(woken === undefined ? next : Math.min(next, woken));
      });
  }

  /** When the next round is due after one that resolved with `outcome`. */
  private succeeded(outcome: RoundOutcome): number {
    const { intervalMs, idleMaxMs, minPauseMs = 0 } = this.options;
    if (this.failures > 0) {
      this.options.logger?.info(
        { task: this.options.name, failures: this.failures },
        'periodic task recovered',
      );
    }
    this.failures = 0;
    this.options.onProgress?.();
    const now = Date.now();
    if (outcome === 'busy') {
      this.idleRounds = 0;
      return alignedWake(now + intervalMs, now);
    }
    if (outcome === 'idle') {
      const pause = Math.min(intervalMs * 2 ** Math.min(this.idleRounds, 16), idleMaxMs);
      this.idleRounds++;
      return alignedWake(now + pause, now);
    }
    this.idleRounds = 0;
    return now + Math.min(Math.max(outcome.nextAt - now, minPauseMs), idleMaxMs);
  }

  private failed(err: unknown): number {
    this.failures++;
    if (this.failures === 1) {
      this.options.logger?.warn(
        { task: this.options.name, err: err instanceof Error ? err.message : String(err) },
        'periodic task failed; retrying with backoff',
      );
    }
    const backoff = Math.min(
      this.options.intervalMs * 2 ** Math.min(this.failures, 16),
      this.options.maxBackoffMs ?? 5000,
    );
    return Date.now() + backoff;
  }
}
