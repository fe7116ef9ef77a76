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
  type ListOptions,
  QueueNames,
  type RedisClient,
  type SubmitResult,
  submitParsedJob,
} from '@sandstream/bus';
import { Queue } from 'bullmq';
import { decodeFollowEntry, type FollowItem } from './follow-entry.js';
import { withSubmitSpan } from './submit-span.js';

export interface SandstreamClientOptions {
  /** An ioredis client (or Cluster) to use; the client does not close it. */
  redis?: RedisClient;
  /** Used when `redis` is not given (default redis://127.0.0.1:6379). */
  redisUrl?: string;
  /** The deployment's namespace (KeySpace); must match the services'. */
  prefix?: string;
}

export interface WaitOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface FollowOptions {
  /** Resume after this cursor (a FollowItem's cursor); default: the start of the stream. */
  from?: string;
  signal?: AbortSignal;
}

export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
}

/** How long a blocking read waits before re-checking the record (covers a trimmed stream). */
const BLOCK_MS = 1000;

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
  private queue: Queue<JobsPayload> | undefined;
  private cancels: Queue<CancelRequestPayload> | undefined;

  constructor(options: SandstreamClientOptions = {}) {
    this.ownsRedis = options.redis === undefined;
    this.redis =
      options.redis ?? createRedis({ url: options.redisUrl ?? 'redis://127.0.0.1:6379', role: 'producer' });
    this.keys = createKeySpace(options.prefix);
    this.jobStore = new JobStore({ redis: this.redis, keys: this.keys });
  }

  private jobsQueue(): Queue<JobsPayload> {
    this.queue ??= new Queue<JobsPayload>(QueueNames.jobs, {
      connection: this.redis,
      prefix: this.keys.bullPrefix,
      defaultJobOptions: DefaultJobOptions,
    });
    return this.queue;
  }

  private cancelQueue(): Queue<CancelRequestPayload> {
    this.cancels ??= new Queue<CancelRequestPayload>(QueueNames.dispatchCancel, {
      connection: this.redis,
      prefix: this.keys.bullPrefix,
    });
    return this.cancels;
  }

  /**
   * Validates and submits a job (libs/bus submitParsedJob after one parse: the same path every producer uses). A bad
   * spec throws JobSpecError naming each field and rule, prefixed by `source` (e.g. a file
   * name), and nothing is written. Runs inside a `sandstream.submit` span (submit-span.ts)
   * whose context the job carries, so every service's spans for the job join its trace.
   */
  submit(input: unknown, source?: string): Promise<SubmitResult> {
    return withSubmitSpan(input, source, (spec) => submitParsedJob(this.jobStore, this.jobsQueue(), spec));
  }

  get(jobId: string): Promise<JobRecord | null> {
    return this.jobStore.get(jobId);
  }

  list(options: ListOptions = {}): Promise<JobRecord[]> {
    return this.jobStore.list(options);
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
  async wait(jobId: string, options: WaitOptions = {}): Promise<JobRecord> {
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
      throw new Error(`job ${jobId} ${record ? `is ${record.state}` : 'does not exist'}`);
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  /**
   * Yields the job's timeline (state changes, step boundaries, output lines) from the start of
   * its events stream, or after `from`; ends after the terminal state. Uses its own connection
   * for the blocking reads, so several follows can run at once.
   */
  async *follow(
    jobId: string,
    options: FollowOptions & { statesOnly?: boolean } = {},
  ): AsyncGenerator<FollowItem, void, undefined> {
    const stream = this.keys.sandbox(jobId).events;
    const reader = this.redis.duplicate();
    const abort = () => reader.disconnect();
    options.signal?.addEventListener('abort', abort, { once: true });
    let cursor = options.from ?? '0-0';
    try {
      while (!options.signal?.aborted) {
        let reply: [string, [string, string[]][]][] | null;
        try {
          reply = (await reader.xread(
            'COUNT',
            500,
            'BLOCK',
            BLOCK_MS,
            'STREAMS',
            stream,
            cursor,
          )) as typeof reply;
        } catch (err) {
          if (options.signal?.aborted) return;
          throw err;
        }
        const entries = reply?.[0]?.[1] ?? [];
        for (const [id, fields] of entries) {
          cursor = id;
          const item = decodeFollowEntry(id, fields);
          if (!item) continue;
          if (options.statesOnly && item.type !== 'state') continue;
          yield item;
          if (item.type === 'state' && item.terminal) return;
        }
        if (entries.length === 0) {
          // Nothing new: the terminal entry may have been trimmed away or the job deleted.
          const state = await this.redis.hget(this.keys.job(jobId), 'state');
          if (state === null) throw new Error(`job ${jobId} does not exist`);
          if (isTerminal(state as JobState)) {
            const more = (await this.redis.xread('COUNT', 1, 'STREAMS', stream, cursor)) as typeof reply;
            if (!more || more[0]?.[1].length === 0) {
              yield { type: 'state', cursor, from: null, to: state as JobState, terminal: true };
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
    await Promise.all([this.queue?.close(), this.cancels?.close()]);
    if (this.ownsRedis) await this.redis.quit();
  }
}
