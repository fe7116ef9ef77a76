import {
  EventBatching,
  encodeEvent,
  SCHEMA_VERSION,
  type StepEvent,
  type StepEventKind,
  type StepResult,
  StreamLimits,
} from '@sandstream/wire';
import type { ChainableCommander, Redis } from 'ioredis';
import { type AuthFailureClock, isAuthError } from './auth-failure.js';
import type { Logger } from './logger.js';
import { fitsOneEvent, splitLine } from './split-line.js';
import type { StreamBudget } from './stream-budget.js';

/**
 * How the lines of a busy step go out: pipelines of at most 250 XADDs, up to 4 of them waiting
 * for their replies at once (1,000 lines in flight, as many as the single pipeline of 1,000 it
 * replaces). Measured with ioredis 5 against a local Redis on `seq 1 1000000`, in the agent's
 * small young generation: one pipeline of 1,000 at a time delivered 0.47-0.50x of the raw XADD
 * ceiling, several smaller ones 0.54-0.64x. ioredis allocates a few KB per command; while one
 * big pipeline waited, the scavenger copied and promoted all of it, and Redis sat idle while the
 * agent built the next one. (Pipelines of 20,000 cost ~70 MB more memory.)
 */
export const DEFAULT_MAX_WRITE_LINES = 250;
export const DEFAULT_MAX_WRITES_IN_FLIGHT = 4;

/** Adds the step's `completed` event to the pipeline that carries its result (and, when given, the result in it). */
export type AppendCompleted = (pipeline: ChainableCommander, result?: StepResult) => void;

export interface EventPublisherOptions {
  redis: Redis;
  /** The job's events stream. */
  key: string;
  stepId: string;
  /** At most this many lines are held (queued or being written) at once; further lines are dropped. */
  maxBufferedLines: number;
  /** ... and at most about this many bytes of encoded events. */
  maxBufferedBytes: number;
  log: Logger;
  batchLines?: number;
  batchDelayMs?: number;
  /** The most events one pipelined write carries (ioredis's cost per command grows with pipeline size). */
  maxWriteLines?: number;
  /** How many pipelined writes may wait for their replies at once. */
  maxWritesInFlight?: number;
  streamMaxLength?: number;
  /** When given, a write Redis refuses for our credentials (WRONGPASS) is repeated until the clock gives up. */
  auth?: AuthFailureClock;
  /**
   * The log archive is on: lines wait (back-pressure) instead of being dropped while Redis is
   * reachable, keeping the stream below the budget's high water mark; see StreamBudget.
   */
  budget?: StreamBudget;
}

/**
 * Turns one step's output lines into events on the job's stream.
 *
 * Every line gets the next `seq`, whether it is shipped or dropped, so a follower sees a gap
 * where it missed something. Lines are soft-batched (50 lines or 100 ms) into one pipelined
 * round of `XADD MAXLEN ~`. The executor's `onLine` never waits for Redis: events wait in a
 * bounded buffer (lines AND bytes, counting the batch being written), and when Redis is slower
 * than the child, or gone, lines beyond the bound are counted and dropped instead of queued.
 * `started` and `completed` are never dropped, so a follower always learns how a step ended.
 *
 * With a StreamBudget (the log archive on) the bound does not drop while Redis is reachable:
 * accepting() also says no while the stream is at its high water mark, and holding() tells the
 * executor to stop reading (and wait for onceAccepting) rather than drop. Only while the writer
 * connection is down does it buffer, drop and count as without the archive.
 */
export class EventPublisher {
  private seq = 0;
  /** Line seqs handed out so far (shipped or dropped); `seq` also counts started/completed. */
  private lines = 0;
  private queue: StepEvent[] = [];
  private queuedBytes = 0;
  private inFlightLines = 0;
  private inFlightBytes = 0;
  /** Pipelined writes handed to ioredis and not yet answered. */
  private inFlight = 0;
  private timer: NodeJS.Timeout | null = null;
  private dropped = 0;
  private drainWaiters: (() => void)[] = [];
  /** Executors waiting for the buffer to have room (onceAccepting while isFull). */
  private roomWaiters: (() => void)[] = [];
  private settleWaiters: (() => void)[] = [];
  private lastMs = 0;
  private lastStamp = '';
  private readonly batchLines: number;
  private readonly batchDelayMs: number;
  private readonly streamMaxLength: number;
  private readonly maxWriteLines: number;
  private readonly maxWritesInFlight: number;

  constructor(private readonly options: EventPublisherOptions) {
    this.batchLines = options.batchLines ?? EventBatching.maxLines;
    this.batchDelayMs = options.batchDelayMs ?? EventBatching.maxDelayMs;
    this.streamMaxLength = options.streamMaxLength ?? StreamLimits.eventStreamMaxLength;
    this.maxWriteLines = options.maxWriteLines ?? DEFAULT_MAX_WRITE_LINES;
    this.maxWritesInFlight = options.maxWritesInFlight ?? DEFAULT_MAX_WRITES_IN_FLIGHT;
  }

  get droppedLines(): number {
    return this.dropped;
  }

  /** Output lines of the step so far, shipped or dropped (StepResult.outputLines). */
  get outputLines(): number {
    return this.lines;
  }

  /** Lines and bytes held right now (for tests and metrics). */
  get buffered(): { lines: number; bytes: number } {
    return {
      lines: this.queue.length + this.inFlightLines,
      bytes: this.queuedBytes + this.inFlightBytes,
    };
  }

  started(): void {
    this.enqueue(this.event('started', 0), true);
    this.flushSoon(true);
  }

  /** Called by the executor once per output line. Never blocks, never throws. */
  line(stream: 'stdout' | 'stderr', line: string): void {
    if (fitsOneEvent(line)) this.addLine(stream, line);
    else for (const piece of splitLine(line)) this.addLine(stream, piece);
  }

  /**
   * False while a further line would be dropped, or with the archive on, would have to wait: the
   * executor then calls droppedLine() instead of line(), or if holding(), waits for onceAccepting().
   */
  accepting(): boolean {
    if (this.isFull()) return false;
    const budget = this.options.budget;
    return !budget?.connected || budget.hasRoom();
  }

  /** When accepting() is false: true if the line must wait (archive on, Redis reachable), false if it is dropped. */
  holding(): boolean {
    return this.options.budget?.connected === true;
  }

  /** Calls `callback` once when accepting() may be true again (or holding() false). */
  onceAccepting(callback: () => void): void {
    if (this.accepting() || !this.holding()) queueMicrotask(callback);
    else if (this.isFull()) this.roomWaiters.push(callback);
    else if (this.options.budget) this.options.budget.onRoom(callback);
    else queueMicrotask(callback);
  }

  /** A line the executor did not decode because accepting() said it would be dropped; it still takes a seq. */
  droppedLine(): void {
    this.seq += 1;
    this.lines += 1;
    this.dropped += 1;
  }

  private addLine(stream: 'stdout' | 'stderr', line: string): void {
    this.seq += 1;
    this.lines += 1;
    if (this.isFull()) {
      this.dropped += 1;
      return;
    }
    // Built in one literal, in the same field order as event(): one object shape for every line.
    this.enqueue(
      {
        schemaVersion: SCHEMA_VERSION,
        stepId: this.options.stepId,
        kind: stream,
        seq: this.seq,
        line,
        timestamp: this.timestamp(),
      },
      false,
    );
  }

  /**
   * Queues the completed event and hands every queued event to ioredis; the returned `handedOver`
   * resolves once the last of them has been passed to the connection, so a command the caller
   * sends after it (the StepResult) is written after them without waiting for their
   * acknowledgement; `written` resolves once Redis acknowledged them all.
   *
   * A short tail (the usual case) is handed over at once. A long one goes in pipelines of
   * maxWriteLines, one after another: starting them all together would hold every command
   * object of the tail in ioredis at the same time, which measured as the agent's peak memory.
   */
  complete(exitCode: number | null): { handedOver: Promise<void>; written: Promise<void> } {
    this.seq += 1;
    this.enqueue(this.event('completed', this.seq, { exitCode, droppedLines: this.dropped }), true);
    this.dispose();
    const handedOver = this.handOver();
    return { handedOver, written: handedOver.then(() => this.drained()) };
  }

  /**
   * Ends the step like complete(), except that the `completed` event is not queued: the caller
   * appends it (`appendCompleted`) to the pipeline that carries the StepResult, so the end of a
   * step costs one socket write and one reply instead of two. Every line is handed over first,
   * so on the one writer connection `completed` still follows the last line, and the result
   * follows `completed`. `written` covers the lines only; the caller's pipeline reports on the rest.
   */
  finish(exitCode: number | null): {
    handedOver: Promise<void>;
    written: Promise<void>;
    appendCompleted: AppendCompleted;
  } {
    this.seq += 1;
    const completed = this.event('completed', this.seq, { exitCode, droppedLines: this.dropped });
    this.dispose();
    const handedOver = this.handOver();
    return {
      handedOver,
      written: handedOver.then(() => this.drained()),
      appendCompleted: (pipeline, result) => {
        this.appendXadd(pipeline, result ? { ...completed, result } : completed);
      },
    };
  }

  private appendXadd(pipeline: ChainableCommander, event: StepEvent): void {
    pipeline.xadd(this.options.key, 'MAXLEN', '~', this.streamMaxLength, '*', ...encodeEvent(event));
  }

  private async handOver(): Promise<void> {
    while (this.queue.length > this.maxWriteLines) {
      while (this.inFlight < this.maxWritesInFlight && this.queue.length > this.maxWriteLines)
        this.startFlush();
      if (this.queue.length > this.maxWriteLines) await this.nextSettle();
    }
    if (this.queue.length > 0) this.startFlush();
  }

  /** Resolves after the next write settles. */
  private nextSettle(): Promise<void> {
    return new Promise((resolve) => this.settleWaiters.push(resolve));
  }

  /** Resolves when nothing is queued or in flight. */
  drained(): Promise<void> {
    if (this.queue.length === 0 && this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Stops the batching timer; events already handed to ioredis are still written. */
  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private isFull(): boolean {
    return (
      this.queue.length + this.inFlightLines >= this.options.maxBufferedLines ||
      this.queuedBytes + this.inFlightBytes >= this.options.maxBufferedBytes
    );
  }

  /**
   * Events wait as objects and are serialised only when written: a queued line then costs its
   * text plus a small object (the stepId and, within a millisecond, the timestamp are shared),
   * about a third of its JSON, and a dropped line is never serialised at all.
   */
  private event(kind: StepEventKind, seq: number, extra?: Partial<StepEvent>): StepEvent {
    const event: StepEvent = {
      schemaVersion: SCHEMA_VERSION,
      stepId: this.options.stepId,
      kind,
      seq,
      ...extra,
      timestamp: this.timestamp(),
    };
    return event;
  }

  /** Formatting a date per line is measurable at a million lines; reuse it within a millisecond. */
  private timestamp(): string {
    const now = Date.now();
    if (now !== this.lastMs) {
      this.lastMs = now;
      this.lastStamp = new Date(now).toISOString();
    }
    return this.lastStamp;
  }

  private enqueue(event: StepEvent, control: boolean): void {
    this.queue.push(event);
    this.queuedBytes += sizeOf(event);
    this.options.budget?.added();
    if (control) return;
    if (this.queue.length >= this.batchLines) this.flushSoon(true);
    else this.flushSoon(false);
  }

  private flushSoon(now: boolean): void {
    // A bounded number of writes at a time while the step runs: a running write picks the queue
    // up when it finishes, so under load batches grow instead of round trips piling up.
    if (this.inFlight >= this.maxWritesInFlight) return;
    if (now) {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      this.startFlush();
      return;
    }
    if (!this.timer) this.timer = setTimeout(() => this.onTimer(), this.batchDelayMs);
  }

  private onTimer(): void {
    this.timer = null;
    if (this.inFlight < this.maxWritesInFlight && this.queue.length > 0) this.startFlush();
  }

  private startFlush(): void {
    let batch: StepEvent[];
    let bytes: number;
    if (this.queue.length <= this.maxWriteLines) {
      batch = this.queue;
      bytes = this.queuedBytes;
      this.queue = [];
      this.queuedBytes = 0;
    } else {
      batch = this.queue.splice(0, this.maxWriteLines);
      bytes = 0;
      for (const event of batch) bytes += sizeOf(event);
      this.queuedBytes -= bytes;
    }
    this.inFlight += 1;
    this.inFlightLines += batch.length;
    this.inFlightBytes += bytes;
    // write() sends synchronously (ioredis writes a pipeline when exec() is called) and settles later.
    void this.write(batch).finally(() => {
      this.inFlight -= 1;
      this.inFlightLines -= batch.length;
      this.inFlightBytes -= bytes;
      this.afterFlush();
    });
  }

  private async write(batch: StepEvent[]): Promise<void> {
    if (batch.length === 0) return;
    const { redis, key, log, auth, budget } = this.options;
    let length: number | undefined;
    let lost = 0;
    const send = async () => {
      const pipeline = redis.pipeline();
      for (const event of batch) this.appendXadd(pipeline, event);
      // The stream's length right after this batch: what the budget measures room by.
      if (budget) pipeline.xlen(key);
      const replies = await pipeline.exec();
      const failed = replies?.find(([err]) => err);
      // A refusal of our credentials rejects every command of the pipeline, so none was
      // written: throwing it lets the clock send the whole batch again once we are let in.
      if (failed && auth && isAuthError(failed[0])) throw failed[0];
      if (failed) log.warn('event write failed', { key, error: String(failed[0]) });
      if (!budget || !replies) return;
      const last = replies[batch.length];
      if (last && !last[0] && typeof last[1] === 'number') length = last[1];
      lost = replies.filter(([err], i) => err && i < batch.length && isLine(batch[i])).length;
    };
    try {
      await (auth ? auth.retry(send) : send());
    } catch (err) {
      log.warn('event write failed', { key, error: (err as Error).message });
      if (budget) lost = batch.filter(isLine).length;
    }
    if (!budget) return;
    // With the archive on a follower and the archive must be told: the lines took their seqs
    // but are not in the stream, so the step's droppedLines counts them.
    this.dropped += lost;
    budget.settled(batch.length, length);
  }

  private afterFlush(): void {
    this.continueFlushing();
    // Last, so that an executor resumed here finds the next writes already under way.
    if (this.roomWaiters.length > 0 && !this.isFull()) {
      const waiting = this.roomWaiters;
      this.roomWaiters = [];
      for (const callback of waiting) callback();
    }
  }

  private continueFlushing(): void {
    const settled = this.settleWaiters;
    this.settleWaiters = [];
    for (const resolve of settled) resolve();
    if (this.queue.length === 0) {
      if (this.inFlight > 0) return;
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const resolve of waiters) resolve();
      return;
    }
    // Output kept coming while we wrote: under load, batches grow to whatever piled up, which
    // is what keeps a fast producer from outrunning a fast Redis.
    while (
      this.inFlight < this.maxWritesInFlight &&
      (this.queue.length >= this.batchLines || (this.drainWaiters.length > 0 && this.queue.length > 0))
    ) {
      this.startFlush();
    }
    if (this.queue.length > 0) this.flushSoon(false);
  }
}

function isLine(event: StepEvent | undefined): boolean {
  return event?.kind === 'stdout' || event?.kind === 'stderr';
}

/** Bytes an event will take on the wire, roughly: the line plus the JSON around it. */
const ENVELOPE_BYTES = 160;
function sizeOf(event: StepEvent): number {
  // String length approximates bytes (V8 keeps ASCII one byte per character); the bound only
  // needs to be roughly right, and counting exact UTF-8 bytes per line would cost more.
  return ENVELOPE_BYTES + (event.line?.length ?? 0);
}
