import {
  type CancelRequestPayload,
  type CancelResult,
  cancelJob,
  createKeySpace,
  createRedis,
  DefaultJobOptions,
  isTerminal,
  type JobRecord,
  type JobState,
  JobStore,
  type JobsPayload,
  type KeySpace,
  QueueNames,
  type RedisClient,
  SandboxCommands,
  type SubmitResult,
  submitParsedJob,
} from '@sandstream/bus';
import { Queue } from 'bullmq';
import {
  type FollowOptions,
  FollowOptionsSchema,
  type ListOptions,
  ListOptionsSchema,
  parseOptions,
  type SandstreamClientOptions,
  SandstreamClientOptionsSchema,
  type SandstreamWarning,
  type WaitOptions,
  WaitOptionsSchema,
} from './client-options.js';
import { decodeFollowEntry, type FollowItem } from './follow-entry.js';
import { isTransientRedisError, JobNotFoundError } from './job-not-found.js';
import { blockingReader, ReaderPool } from './reader-pool.js';
import { Sandboxes, waitEnded } from './sandboxes.js';
import { SchedulerPresence } from './scheduler-presence.js';
import { withSubmitSpan } from './submit-span.js';
import { TimelineGaps } from './timeline-gaps.js';

export * from './client-options.js';

export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
}

function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** How long a blocking read waits before re-checking the record (covers a trimmed stream). */
const BLOCK_MS = 1000;
/** Stream entries a follower reads per round trip. */
const FOLLOW_PAGE = 500;

/**
 * The TypeScript SDK. Every call validates its input first (a bad spec throws JobSpecError
 * naming the field and rule, and nothing is queued), then talks to Redis only: the services
 * need not be reachable over any other channel.
 */
export class SandstreamClient {
  readonly redis: RedisClient;
  readonly keys: KeySpace;
  private readonly ownsRedis: boolean;
  private readonly jobStore: JobStore;
  private readonly onWarning: (warning: SandstreamWarning) => void;
  private queue: Queue<JobsPayload> | undefined;
  private presence: SchedulerPresence | undefined;
  private cancels: Queue<CancelRequestPayload> | undefined;
  private readonly readers: ReaderPool;
  /** Live sandboxes: create, connect, get, list (sandboxes.ts). */
  readonly sandboxes: Sandboxes;

  constructor(options: SandstreamClientOptions = {}) {
    const opts = parseOptions(SandstreamClientOptionsSchema, options, 'SandstreamClient options');
    this.ownsRedis = opts.redis === undefined;
    this.redis =
      opts.redis ?? createRedis({ url: opts.redisUrl ?? 'redis://127.0.0.1:6379', role: 'producer' });
    // Without a listener ioredis prints every failed reconnect as an "Unhandled error event"
    // trace; the same error already reaches the caller as the rejected command.
    if (this.ownsRedis) this.redis.on('error', () => {});
    this.keys = createKeySpace(opts.namespace);
    this.jobStore = new JobStore({ redis: this.redis, keys: this.keys });
    this.onWarning =
      opts.onWarning ?? ((w) => process.emitWarning(w.message, { type: 'SandstreamWarning', code: w.code }));
    this.readers = new ReaderPool(this.redis);
    const store = this.jobStore;
    this.sandboxes = new Sandboxes({
      redis: this.redis,
      keys: this.keys,
      store,
      commands: new SandboxCommands({ redis: this.redis, keys: this.keys }),
      readers: this.readers,
      submit: async (spec) => {
        const result = await submitParsedJob(store, this.jobsQueue(), spec);
        const warning = await this.presence?.check();
        if (warning) this.onWarning(warning);
        return result;
      },
      requestClose: async (id) => {
        await cancelJob(store, this.cancelQueue(), id, 'user');
      },
      waitEnded: (id) => waitEnded(store, id),
    });
  }

  private jobsQueue(): Queue<JobsPayload> {
    if (!this.queue) {
      this.queue = new Queue<JobsPayload>(QueueNames.jobs, {
        connection: this.redis,
        prefix: this.keys.bullPrefix,
        defaultJobOptions: DefaultJobOptions,
      });
      // BullMQ re-emits connection errors on the queue and, with no listener, prints them with
      // console.error; they reach the caller as rejected calls already.
      this.queue.on('error', () => {});
      this.presence = new SchedulerPresence(this.queue, this.keys.namespace);
    }
    return this.queue;
  }

  private cancelQueue(): Queue<CancelRequestPayload> {
    if (!this.cancels) {
      this.cancels = new Queue<CancelRequestPayload>(QueueNames.dispatchCancel, {
        connection: this.redis,
        prefix: this.keys.bullPrefix,
      });
      // As for the jobs queue: connection errors reach the caller as rejected calls already.
      this.cancels.on('error', () => {});
    }
    return this.cancels;
  }

  /**
   * Validates and submits a job (libs/bus submitParsedJob after one parse: the same path every producer uses). A bad
   * spec throws JobSpecError naming each field and rule, prefixed by `source` (e.g. a file
   * name), and nothing is written. Runs inside a `sandstream.submit` span (submit-span.ts)
   * whose context the job carries, so every service's spans for the job join its trace.
   *
   * When no scheduler is connected to the namespace (a wrong namespace, or the services are not
   * running) the job is still queued, and `onWarning` is told, because otherwise the caller
   * would wait at `queued` with no sign of why.
   */
  async submit(input: unknown, source?: string): Promise<SubmitResult> {
    const queue = this.jobsQueue();
    const result = await withSubmitSpan(input, source, (spec) => submitParsedJob(this.jobStore, queue, spec));
    const warning = await this.presence?.check();
    if (warning) this.onWarning(warning);
    return result;
  }

  get(jobId: string): Promise<JobRecord | null> {
    return this.jobStore.get(jobId);
  }

  async list(options: ListOptions = {}): Promise<JobRecord[]> {
    return this.jobStore.list(parseOptions(ListOptionsSchema, options, 'list options'));
  }

  /**
   * Asks to cancel (libs/bus cancelJob): recorded on the job, which ends a job still queued on
   * the spot; a scheduled or starting job is ended by pod-lifecycle before anything starts, and a
   * running one by the step-dispatcher, which kills the running step and ends the job
   * `cancelled` once the agent confirms (or after a short backstop, if it never does).
   */
  cancel(jobId: string, reason = 'cancelled by user'): Promise<CancelResult> {
    return cancelJob(this.jobStore, this.cancelQueue(), jobId, reason);
  }

  /** Resolves with the job's record once it reaches a terminal state. */
  async wait(jobId: string, waitOptions: WaitOptions = {}): Promise<JobRecord> {
    const options = parseOptions(WaitOptionsSchema, waitOptions, 'wait options');
    const deadline =
      options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.timeoutMs;
    const controller = new AbortController();
    const timer =
      options.timeoutMs === undefined ? undefined : setTimeout(() => controller.abort(), options.timeoutMs);
    options.signal?.addEventListener('abort', () => controller.abort(), { once: true });
    try {
      for await (const item of this.follow(jobId, { signal: controller.signal, statesOnly: true })) {
        if (item.type === 'state' && item.terminal) break;
      }
      const record = await this.get(jobId);
      if (record && isTerminal(record.state)) return record;
      if (Date.now() >= deadline)
        throw new WaitTimeoutError(`job ${jobId} not finished after ${options.timeoutMs} ms`);
      if (!record) throw new JobNotFoundError(jobId, true);
      throw new Error(`job ${jobId} is ${record.state}`);
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  /**
   * Yields the job's timeline (state changes, step boundaries, output lines) from the start of
   * its events stream, or after `from`; ends after the terminal state. Where the capped stream
   * no longer held some of a step's lines (or the agent dropped them), a `gap` item stands in
   * their place (timeline-gaps.ts). Uses its own connection
   * for the blocking reads, so several follows can run at once.
   *
   * A Redis outage does not end it: reads are retried with backoff (up to 2 s apart) until Redis
   * answers again or `signal` aborts. A job whose record is gone ends it with JobNotFoundError
   * (`vanished` when the job had been seen: Redis lost its data).
   */
  async *follow(
    jobId: string,
    followOptions: FollowOptions = {},
  ): AsyncGenerator<FollowItem, void, undefined> {
    for await (const page of this.followPages(jobId, followOptions)) for (const item of page) yield item;
  }

  /**
   * follow() a page at a time: the items of one stream read (up to FOLLOW_PAGE entries) together, the
   * same items in the same order. For a reader that forwards them in bulk (the HTTP API writes
   * one page in one socket write) and would otherwise pay an await per item.
   */
  async *followPages(
    jobId: string,
    followOptions: FollowOptions = {},
  ): AsyncGenerator<FollowItem[], void, undefined> {
    const options = parseOptions(FollowOptionsSchema, followOptions, 'follow options');
    const stream = this.keys.sandbox(jobId).events;
    const reader = blockingReader(this.redis);
    // Connection errors surface as rejected reads, retried below; without a listener ioredis
    // would print each reconnect attempt as an "Unhandled error event".
    reader.on('error', () => {});
    const abort = () => reader.disconnect();
    options.signal?.addEventListener('abort', abort, { once: true });
    let cursor = options.from ?? '0-0';
    // Resuming from a cursor means the job was seen; otherwise the first entry proves it.
    let seen = options.from !== undefined;
    const gaps = new TimelineGaps({ from: options.from });
    let failures = 0;
    let outageSince: number | undefined;
    type Reply = [string, [string, string[]][]][] | null;
    const read = (after: string) =>
      reader.xread('COUNT', FOLLOW_PAGE, 'BLOCK', BLOCK_MS, 'STREAMS', stream, after) as Promise<Reply>;
    /** The next page, asked for while this one is decoded and handed on (a full page: more may wait). */
    let ahead: Promise<Reply> | undefined;
    try {
      while (!options.signal?.aborted) {
        let reply: Reply;
        let state: string | null = null;
        try {
          const next = ahead ?? read(cursor);
          ahead = undefined;
          reply = await next;
          if ((reply?.[0]?.[1] ?? []).length === 0)
            state = await this.redis.hget(this.keys.job(jobId), 'state');
          failures = 0;
          outageSince = undefined;
        } catch (err) {
          if (options.signal?.aborted) return;
          if (!isTransientRedisError(err)) throw err;
          outageSince ??= Date.now();
          if (options.outageLimitMs !== undefined && Date.now() - outageSince >= options.outageLimitMs)
            throw err;
          failures++;
          await abortableSleep(Math.min(100 * 2 ** Math.min(failures, 5), 2000), options.signal);
          continue;
        }
        const entries = reply?.[0]?.[1] ?? [];
        if (entries.length > 0) seen = true;
        if (entries.length === FOLLOW_PAGE) {
          ahead = read(entries[entries.length - 1]?.[0] as string);
          // Awaited on the next round; one left behind (the job ended, the reader closed) is dropped.
          ahead.catch(() => {});
        }
        const page: FollowItem[] = [];
        let ended = false;
        for (const [id, fields] of entries) {
          cursor = id;
          const decoded = decodeFollowEntry(id, fields);
          if (!decoded) continue;
          if (options.statesOnly && decoded.type !== 'state') continue;
          for (const item of gaps.accept(decoded)) page.push(item);
          if (decoded.type === 'state' && decoded.terminal) {
            ended = true;
            break;
          }
        }
        if (page.length > 0) yield page;
        if (ended) return;
        if (entries.length === 0) {
          // Nothing new: the terminal entry may have been trimmed away or the job deleted.
          if (state === null) throw new JobNotFoundError(jobId, seen);
          if (isTerminal(state as JobState)) {
            const more = (await this.redis
              .xread('COUNT', 1, 'STREAMS', stream, cursor)
              // Redis went away between the two reads: the next round reads again.
              .catch((err: unknown) => (isTransientRedisError(err) ? undefined : Promise.reject(err)))) as
              | typeof reply
              | undefined;
            if (more === undefined) continue;
            if (!more || more[0]?.[1].length === 0) {
              yield [{ type: 'state', cursor, from: null, to: state as JobState, terminal: true }];
              return;
            }
          }
        }
      }
    } finally {
      options.signal?.removeEventListener('abort', abort);
      reader.disconnect();
    }
  }

  async close(): Promise<void> {
    this.readers.close();
    await Promise.all([this.queue?.close(), this.cancels?.close()]);
    if (this.ownsRedis) await this.redis.quit();
  }
}
