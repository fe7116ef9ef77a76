import type { Redis } from 'ioredis';
import type { Logger } from './logger.js';

/** How often the stream's length is first read while some step waits for room. */
export const DEFAULT_BUDGET_POLL_MS = 25;
/**
 * The longest pause between two reads while the wait goes on: a stalled archiver must not turn a
 * thousand waiting agents into 40,000 XLEN a second on the shared Redis.
 */
const MAX_BUDGET_POLL_MS = 400;

export interface StreamBudgetOptions {
  /** The writer connection: XLEN goes behind the XADDs already sent, so its answer counts them. */
  redis: Redis;
  /** The job's events stream. */
  key: string;
  /** Entries in the stream plus events not yet acknowledged are kept below this. */
  highWater: number;
  log: Logger;
  pollMs?: number;
}

/**
 * The agent's share of its events stream while the log archive is on. The stream is capped at
 * ~10,000 entries (XADD MAXLEN ~), and whatever that cap trims before the archiver read it is
 * lost; so instead of relying on the cap, the agent keeps (entries in the stream + events it has
 * queued or sent without an answer) below a high water mark and stops taking output (the run
 * step stops reading the child's pipes) until the archiver trims the stream (XTRIM MINID).
 *
 * The length comes from an XLEN at the end of each write pipeline, and while a step waits, from
 * an XLEN every `pollMs`. Replies on one connection come in order, so when an XLEN answers,
 * every write sent before it has answered too: the events still counted as pending are exactly
 * those sent after it, which the length does not include yet.
 *
 * While the writer connection is not ready (Redis unreachable) nothing can be measured and
 * nothing reaches the stream: steps then fall back to the bounded buffer that drops and counts
 * (hasRoom() is not asked, see EventPublisher.holding()).
 */
export class StreamBudget {
  private length = 0;
  private pending = 0;
  private waiters: (() => void)[] = [];
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private closed = false;
  readonly highWater: number;
  private readonly pollMs: number;
  /** The next pause: pollMs, doubling while nothing changes, back to pollMs once there is room. */
  private delayMs: number;

  constructor(private readonly options: StreamBudgetOptions) {
    this.highWater = options.highWater;
    this.pollMs = options.pollMs ?? DEFAULT_BUDGET_POLL_MS;
    this.delayMs = this.pollMs;
  }

  /**
   * Whether Redis can be written now; when not, steps buffer and drop as without the archive.
   * False once closed: a step woken by close() must fall back to dropping, not wait again (which
   * would call onRoom, be woken at once, and spin).
   */
  get connected(): boolean {
    return !this.closed && this.options.redis.status === 'ready';
  }

  /** Stream entries plus events in the agent's hands, as last known (tests and metrics). */
  get used(): number {
    return this.length + this.pending;
  }

  hasRoom(): boolean {
    return this.length + this.pending < this.highWater;
  }

  /** An event queued for writing. */
  added(count = 1): void {
    this.pending += count;
  }

  /**
   * A write settled: `count` events are no longer pending, and `length` (its XLEN, undefined if
   * the write failed) is the stream's length right after them.
   */
  settled(count: number, length: number | undefined): void {
    this.pending = Math.max(0, this.pending - count);
    if (length !== undefined) this.length = length;
    this.wakeIfRoom();
  }

  /**
   * Calls `callback` once, when there is room again or Redis became unreachable (the waiter then
   * drops instead of holding). Polls the stream's length meanwhile: only the archiver's XTRIM
   * makes room, and it tells nobody.
   */
  onRoom(callback: () => void): void {
    if (this.closed) {
      queueMicrotask(callback);
      return;
    }
    this.waiters.push(callback);
    this.schedulePoll();
  }

  /** Wakes every waiter and stops polling (the agent is exiting). */
  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.wake();
  }

  private schedulePoll(): void {
    if (this.timer || this.closed) return;
    const delay = this.delayMs;
    this.delayMs = Math.min(this.delayMs * 2, MAX_BUDGET_POLL_MS);
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll();
    }, delay);
  }

  private async poll(): Promise<void> {
    if (this.waiters.length === 0) return;
    if (!this.connected) {
      // Redis is away: waiting for room could take forever; the steps fall back to dropping.
      this.wake();
      return;
    }
    if (!this.polling) {
      this.polling = true;
      try {
        this.length = await this.options.redis.xlen(this.options.key);
      } catch (err) {
        this.options.log.debug('XLEN failed', { key: this.options.key, error: (err as Error).message });
      } finally {
        this.polling = false;
      }
    }
    this.wakeIfRoom();
    if (this.waiters.length > 0) this.schedulePoll();
  }

  private wakeIfRoom(): void {
    if (this.waiters.length > 0 && (this.hasRoom() || !this.connected)) this.wake();
  }

  private wake(): void {
    this.delayMs = this.pollMs;
    const waiters = this.waiters;
    this.waiters = [];
    for (const callback of waiters) callback();
  }
}
