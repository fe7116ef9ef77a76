import type { CodeResult, StepEvent, StepEventKind, StepResult } from '@sandstream/wire';
import { EventBatching, encodeEvent, SCHEMA_VERSION, StreamLimits } from '@sandstream/wire/lean';
import type { ChainableCommander, Redis } from 'ioredis';
import { type AuthFailureClock, isAuthError } from './auth-failure.js';
import type { Logger } from './logger.js';
import { fitsOneEvent, splitLine, splitText } from './split-line.js';
import type { StreamBudget } from './stream-budget.js';
import { eventsPerEntry, MAX_EVENTS_PER_ENTRY, type WritePace } from './write-pace.js';

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
/**
 * Paced (no archive), a full buffer holds the step while Redis answers; a write unanswered this
 * long means Redis stalled, and the step goes on, dropping and counting lines as it always did.
 */
export const ANSWER_GRACE_MS = 1000;
/**
 * How long a step's `started` event waits before it is written on its own. A step that ends
 * within it (most commands an AI agent runs: `true`, `ls`, `cat`) sends `started` with its
 * `completed`, in one stream entry, in the pipeline that carries its result: one socket write
 * and one XADD fewer for the agent, and one wake-up of each follower (an XREAD) instead of two
 * (docs/benchmarks.md, "CPU per exec"). A longer step's followers learn that it started this
 * much later; its output is batched for up to EventBatching.maxDelayMs anyway.
 */
export const STARTED_HOLD_MS = 10;
/**
 * A tail of at most this many events, queued when the step ends, rides with `completed` in one
 * entry of the result's pipeline instead of a write of its own (unless the log archive's budget
 * needs each write's length). With `completed` it fills one entry at most (MAX_EVENTS_PER_ENTRY).
 */
export const TAIL_IN_RESULT_PIPELINE = MAX_EVENTS_PER_ENTRY - 1;

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
  /**
   * The agent's share of the sandbox's Redis rate limit, shared by its steps: writes wait for it,
   * and pack several lines into one stream entry when there are more lines than commands to spend.
   */
  pace?: WritePace;
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
 *
 * With a WritePace (the sandbox's Redis rate limit) a write spends one command per entry from the
 * agent's bucket: while it is empty writes wait (lines queue meanwhile), and a write with more
 * lines than the bucket holds packs them, several to an entry, so a step printing faster than its
 * share is batched into fewer commands instead of being stopped for its rate (nothing is dropped
 * for it: a packed write carries more lines per round trip, not fewer).
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
  /** When a write last settled (answered or failed): Redis is answering while this is recent. */
  private lastSettledAt = Date.now();
  /** Wakes held executors once Redis has not answered for ANSWER_GRACE_MS, so that they drop instead. */
  private answerTimer: NodeJS.Timeout | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** Writes a held `started` once STARTED_HOLD_MS passed without the step ending. */
  private startedTimer: NodeJS.Timeout | null = null;
  /** Set while writes wait for the pace (WritePace) to allow the next command. */
  private paceTimer: NodeJS.Timeout | null = null;
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

  /**
   * Queues the `started` event; with `hold` it is written with the step's end, or after
   * STARTED_HOLD_MS, else at once.
   */
  started(hold = true): void {
    this.enqueue(this.event('started', 0), true);
    if (!hold) {
      this.flushSoon(true);
      return;
    }
    this.startedTimer = setTimeout(() => {
      this.startedTimer = null;
      if (this.queue.length > 0) this.flushSoon(true);
    }, STARTED_HOLD_MS);
  }

  /** Called by the executor once per output line. Never blocks, never throws. */
  line(stream: 'stdout' | 'stderr', line: string): void {
    if (fitsOneEvent(line)) this.addLine(stream, line);
    else for (const piece of splitLine(line)) this.addLine(stream, piece);
  }

  /**
   * A code cell's result as the cell produced it: its JSON in pieces of at most
   * Limits.eventLineMaxBytes (a plot is a few), batched with the lines around it. It is not a
   * line: it takes no seq (its events carry the last line's). All or nothing: when its pieces do
   * not all fit the buffer now, none is queued (false), and followers take it from the step's
   * result at its end, so a big result never displaces output lines nor waits for room.
   */
  result(index: number, result: CodeResult): boolean {
    const pieces = splitText(JSON.stringify(result));
    let bytes = 0;
    for (const piece of pieces) bytes += ENVELOPE_BYTES + piece.length;
    if (
      this.queue.length + this.inFlightLines + pieces.length > this.options.maxBufferedLines ||
      this.queuedBytes + this.inFlightBytes + bytes > this.options.maxBufferedBytes
    ) {
      return false;
    }
    pieces.forEach((json, piece) => {
      this.enqueue(
        this.event('result', this.seq, { codeResult: { index, piece, pieces: pieces.length, json } }),
        false,
      );
    });
    return true;
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

  /**
   * When accepting() is false: true if the line must wait, false if it is dropped. It waits with
   * the archive on while Redis is reachable; and with a WritePace (the sandbox's Redis rate
   * limit on) while Redis answers: a step faster than its share of the rate, or than Redis, is
   * slowed down (its child blocks on its full pipe) and loses nothing. Lines are dropped and
   * counted only while the writer connection is down, or Redis has not answered a write for
   * ANSWER_GRACE_MS (a stalled Redis must not stall the step).
   */
  holding(): boolean {
    if (this.options.budget?.connected === true) return true;
    if (!this.options.pace?.paced || this.options.redis.status !== 'ready') return false;
    return this.inFlight === 0 || Date.now() - this.lastSettledAt < ANSWER_GRACE_MS;
  }

  /** Calls `callback` once when accepting() may be true again (or holding() false). */
  onceAccepting(callback: () => void): void {
    if (this.accepting() || !this.holding()) queueMicrotask(callback);
    else if (this.isFull()) {
      this.roomWaiters.push(callback);
      if (!this.options.budget) this.armAnswerTimer();
    } else if (this.options.budget) this.options.budget.onRoom(callback);
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
    // A short tail (a held `started`, a few last lines) goes in the result's pipeline, packed with
    // `completed`: it still follows every earlier write on the one writer connection.
    let tail: StepEvent[] = [];
    if (!this.options.budget && this.queue.length <= TAIL_IN_RESULT_PIPELINE) {
      tail = this.queue;
      this.queue = [];
      this.queuedBytes = 0;
    }
    const handedOver = this.handOver();
    return {
      handedOver,
      written: handedOver.then(() => this.drained()),
      appendCompleted: (pipeline, result) => {
        this.options.pace?.spend(1);
        const last = result ? { ...completed, result } : completed;
        if (tail.length === 0) this.appendXadd(pipeline, last);
        else this.appendPacked(pipeline, [...tail, last]);
      },
    };
  }

  private appendXadd(pipeline: ChainableCommander, event: StepEvent): void {
    pipeline.xadd(this.options.key, 'MAXLEN', '~', this.streamMaxLength, '*', ...encodeEvent(event));
  }

  /**
   * One entry holding several events (the `event` field repeated, in seq order), under the same
   * cap in entries: a packed stream keeps up to MAX_EVENTS_PER_ENTRY times the lines (a follower
   * gets that much more slack exactly while output is fastest; the sandbox's Redis memory for its
   * stream stays within that multiple).
   */
  private appendPacked(pipeline: ChainableCommander, events: StepEvent[]): void {
    const fields: string[] = [];
    for (const event of events) fields.push(...encodeEvent(event));
    pipeline.xadd(this.options.key, 'MAXLEN', '~', this.streamMaxLength, '*', ...fields);
  }

  private async handOver(): Promise<void> {
    // Forced: the end of a step does not wait for the pace (its writes run into the pace's debt,
    // which the next writes wait out); packed, a long tail costs few commands anyway.
    while (this.queue.length > this.maxWriteLines) {
      while (this.inFlight < this.maxWritesInFlight && this.queue.length > this.maxWriteLines)
        this.startFlush(true);
      if (this.queue.length > this.maxWriteLines) await this.nextSettle();
    }
    if (this.queue.length > 0) this.startFlush(true);
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
    if (this.startedTimer) clearTimeout(this.startedTimer);
    this.startedTimer = null;
    if (this.paceTimer) clearTimeout(this.paceTimer);
    this.paceTimer = null;
    if (this.answerTimer) clearTimeout(this.answerTimer);
    this.answerTimer = null;
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

  /**
   * Hands the next batch to ioredis; false when it has to wait for the pace instead (unless
   * forced), in which case a timer calls it again once a command may be sent.
   */
  private startFlush(force = false): boolean {
    const pace = this.options.pace;
    if (!force && pace?.paced) {
      if (this.paceTimer) return false;
      const waitMs = pace.waitMs();
      if (waitMs > 0) {
        this.paceTimer = setTimeout(() => {
          this.paceTimer = null;
          if (this.inFlight < this.maxWritesInFlight && this.queue.length > 0) this.startFlush();
        }, waitMs);
        return false;
      }
    }
    const want = Math.min(this.queue.length, this.maxWriteLines);
    let count = want;
    let perEntry = 1;
    if (pace?.paced) {
      // At most MAX_EVENTS_PER_ENTRY to an entry: what it cannot carry waits for the next write
      // (unless forced: the end of a step takes the commands it needs, in debt).
      const commands = pace.take(want, force ? Math.ceil(want / MAX_EVENTS_PER_ENTRY) : 1);
      count = Math.min(want, commands * MAX_EVENTS_PER_ENTRY);
      perEntry = eventsPerEntry(count, commands);
    }
    let batch: StepEvent[];
    let bytes: number;
    if (count === this.queue.length) {
      batch = this.queue;
      bytes = this.queuedBytes;
      this.queue = [];
      this.queuedBytes = 0;
    } else {
      batch = this.queue.splice(0, count);
      bytes = 0;
      for (const event of batch) bytes += sizeOf(event);
      this.queuedBytes -= bytes;
    }
    this.inFlight += 1;
    this.inFlightLines += batch.length;
    this.inFlightBytes += bytes;
    // write() sends synchronously (ioredis writes a pipeline when exec() is called) and settles later.
    void this.write(batch, perEntry).finally(() => {
      this.lastSettledAt = Date.now();
      this.inFlight -= 1;
      this.inFlightLines -= batch.length;
      this.inFlightBytes -= bytes;
      this.afterFlush();
    });
    return true;
  }

  /** Writes `batch` as entries of `perEntry` events each (1: one entry an event, as unpaced). */
  private async write(batch: StepEvent[], perEntry: number): Promise<void> {
    if (batch.length === 0) return;
    const { redis, key, log, auth, budget } = this.options;
    let length: number | undefined;
    let lost = 0;
    const send = async () => {
      const pipeline = redis.pipeline();
      if (perEntry === 1) for (const event of batch) this.appendXadd(pipeline, event);
      else
        for (let i = 0; i < batch.length; i += perEntry)
          this.appendPacked(pipeline, batch.slice(i, i + perEntry));
      const entries = Math.ceil(batch.length / perEntry);
      // The stream's length right after this batch: what the budget measures room by.
      if (budget) pipeline.xlen(key);
      const replies = await pipeline.exec();
      const failed = replies?.find(([err]) => err);
      // A refusal of our credentials rejects every command of the pipeline, so none was
      // written: throwing it lets the clock send the whole batch again once we are let in.
      if (failed && auth && isAuthError(failed[0])) throw failed[0];
      if (failed) log.warn('event write failed', { key, error: String(failed[0]) });
      if (!budget || !replies) return;
      const last = replies[entries];
      if (last && !last[0] && typeof last[1] === 'number') length = last[1];
      // A failed entry loses every line it held.
      lost = 0;
      replies.forEach(([err], i) => {
        if (!err || i >= entries) return;
        lost += batch.slice(i * perEntry, (i + 1) * perEntry).filter(isLine).length;
      });
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
    if (!this.isFull()) this.wakeRoomWaiters();
  }

  /** Held for the pace: if Redis stops answering, the waiters are woken to drop instead. */
  private armAnswerTimer(): void {
    if (this.answerTimer) return;
    const waitMs = Math.max(1, this.lastSettledAt + ANSWER_GRACE_MS - Date.now());
    this.answerTimer = setTimeout(() => {
      this.answerTimer = null;
      if (this.roomWaiters.length === 0) return;
      if (this.holding()) this.armAnswerTimer();
      else this.wakeRoomWaiters();
    }, waitMs);
  }

  private wakeRoomWaiters(): void {
    if (this.roomWaiters.length === 0) return;
    const waiting = this.roomWaiters;
    this.roomWaiters = [];
    for (const callback of waiting) callback();
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
      if (!this.startFlush()) break;
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
  return ENVELOPE_BYTES + (event.line?.length ?? event.codeResult?.json.length ?? 0);
}
