/**
 * The agent's share of its sandbox's Redis rate limit: the step-dispatcher stops a sandbox that
 * sends Redis more than SANDBOX_REDIS_RATE_LIMIT commands (or stream entries) per second over its
 * window (docs/step-dispatcher.md, "A Redis rate per sandbox"). The agent's own writes count
 * there too, so a legitimate step printing faster than that would be stopped for its output. The
 * agent keeps its event writes to half the limit (the rest is headroom for its heartbeats,
 * results and the sandbox's own use of Redis), and the publisher packs lines into fewer stream
 * entries when there are more lines than commands it may send (decodeEventEntry reads them).
 */
export const PACE_SHARE = 0.5;

/** The step-dispatcher's default SANDBOX_REDIS_RATE_LIMIT, for an agent not told its sandbox's (standalone, seed 000). */
export const DEFAULT_REDIS_RATE_LIMIT = 30_000;

/**
 * The most events one stream entry carries. It bounds what packing does to the events stream (its
 * cap counts entries: packed, it holds up to this many times the lines) and, with the pace, the
 * agent's output: at most share × this lines per second (240,000 at the default limit, above what
 * one agent writes unpaced; an operator's lower limit lowers it in proportion).
 */
export const MAX_EVENTS_PER_ENTRY = 16;

/**
 * The tokens kept for a burst: a tenth of a second's worth. The monitor averages over seconds;
 * the bucket only has to keep a quiet step's first lines from waiting.
 */
const BURST_SECONDS = 0.1;

export interface WritePaceOptions {
  /** The sandbox's limit (AGENT_REDIS_RATE_LIMIT); 0 turns pacing off. */
  limitPerSecond: number;
  now?: () => number;
}

/**
 * A token bucket of Redis commands, one per agent (every step writes through the one writer
 * connection, and the limit is the sandbox's, not a step's). A write asks for as many commands
 * as it has events and gets what the bucket holds; when it is empty the write waits (waitMs).
 */
export class WritePace {
  readonly perSecond: number;
  private readonly burst: number;
  private tokens: number;
  private at: number;
  private readonly now: () => number;

  constructor(options: WritePaceOptions) {
    this.perSecond = options.limitPerSecond * PACE_SHARE;
    this.burst = Math.max(1, this.perSecond * BURST_SECONDS);
    this.tokens = this.burst;
    this.now = options.now ?? Date.now;
    this.at = this.now();
  }

  get paced(): boolean {
    return this.perSecond > 0;
  }

  /** Milliseconds until a command may be sent; 0 now. */
  waitMs(): number {
    if (!this.paced) return 0;
    this.refill();
    return this.tokens >= 1 ? 0 : Math.ceil(((1 - this.tokens) * 1000) / this.perSecond);
  }

  /**
   * Takes commands for a write of `wanted` events: as many as the bucket holds, at most `wanted`,
   * at least `minimum` (a write that cannot wait, the end of a step, goes into debt, which the
   * next writes wait out).
   */
  take(wanted: number, minimum = 1): number {
    if (!this.paced) return wanted;
    this.refill();
    const granted = Math.max(minimum, Math.min(wanted, Math.floor(this.tokens)));
    this.tokens -= granted;
    return granted;
  }

  /** Commands sent outside take() (a step's result, its `completed` event). */
  spend(count: number): void {
    if (!this.paced) return;
    this.refill();
    this.tokens -= count;
  }

  private refill(): void {
    const now = this.now();
    if (now > this.at) {
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.perSecond) / 1000);
      this.at = now;
    }
  }
}

/** Events per stream entry for a write of `events` that may send `entries` commands (1 when it may send one each). */
export function eventsPerEntry(events: number, entries: number): number {
  return entries >= events ? 1 : Math.ceil(events / Math.max(1, entries));
}
