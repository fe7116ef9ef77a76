import type { PeriodicTaskOptions } from './periodic-task.js';
import { onTick } from './shared-tick.js';

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

/**
 * Pauses of at least this long end on the last multiple of it that is not later than asked, so
 * loops of different paces at rest (a 5 s idle recheck, a 10 s report, a 60 s pass) share one
 * tick every 5 s instead of waking on different seconds (issue 32 §3, part 4). Rounding down: such
 * a pause never gets longer, so no bound it stands for gets looser.
 */
export const ALIGN_LONG_PAUSES_MS = 5000;

/**
 * `at`, moved onto the process's shared tick: to the last multiple of ALIGN_LONG_PAUSES_MS not
 * after it when the pause is that long, else to the next multiple of ALIGN_PAUSES_MS when the
 * pause is at least that long; shorter pauses are not moved.
 */
export function alignedWake(at: number, now: number): number {
  const pause = at - now;
  if (pause >= ALIGN_LONG_PAUSES_MS) return Math.floor(at / ALIGN_LONG_PAUSES_MS) * ALIGN_LONG_PAUSES_MS;
  return pause >= ALIGN_PAUSES_MS ? Math.ceil(at / ALIGN_PAUSES_MS) * ALIGN_PAUSES_MS : at;
}

export class AdaptiveTask {
  /** Cancels the pending wake-up (a timer of its own, or its place on a shared tick). */
  private cancelTimer: (() => void) | undefined;
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
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    this.timerAt = undefined;
    await this.running;
  }

  private schedule(at: number): void {
    this.cancelTimer?.();
    this.cancelTimer = undefined;
    if (this.stopped) return;
    this.timerAt = at;
    // A wake-up on the grid shares its timer with every other loop due then (shared-tick.ts).
    if (at % ALIGN_PAUSES_MS === 0) {
      this.cancelTimer = onTick(at, () => this.round());
      return;
    }
    const timer = setTimeout(() => this.round(), Math.max(0, at - Date.now()));
    this.cancelTimer = () => clearTimeout(timer);
  }

  private round(): void {
    this.cancelTimer = undefined;
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
    const pause = Math.max(outcome.nextAt - now, minPauseMs);
    // Work due exactly then is not moved; a pause cut to idleMaxMs is a recheck: on the tick.
    return pause > idleMaxMs ? alignedWake(now + idleMaxMs, now) : now + pause;
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
