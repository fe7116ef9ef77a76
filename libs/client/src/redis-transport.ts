import {
  type CancelRequestPayload,
  type CancelResult,
  cancelJob,
  createKeySpace,
  createRedis,
  DefaultJobOptions,
  DispatchKeys,
  type JobRecord,
  JobStore,
  type JobsPayload,
  type KeySpace,
  NetworkUpdateRequests,
  QueueNames,
  queueConnection,
  type RedisClient,
  requestPause,
  resumeSandbox,
  SandboxCommands,
  SnapshotRecords,
  SnapshotRequests,
  type StoredSpec,
  type SubmitResult,
  setSandboxTimeout,
  submitParsedJob,
} from '@sandstream/bus';
import type { Queue } from 'bullmq';
import type { FollowOptions, ListOptions, SandstreamWarning } from './client-options.js';
import type { FollowItem } from './follow-entry.js';
import { ReaderPool } from './reader-pool.js';
import { followJobPages, followJobStream } from './redis-follow.js';
import { RedisSandboxTransport } from './redis-sandbox-transport.js';
import { READY_RECHECK_MS } from './sandbox-ready-watch.js';
import { SchedulerPresence } from './scheduler-presence.js';
import type { JobTransport, SandstreamTransport } from './transport.js';

export interface RedisTransportOptions {
  redis?: RedisClient | undefined;
  redisUrl?: string | undefined;
  namespace?: string | undefined;
  /** Where preview URLs point (client options previewUrl, previewDomain). */
  preview?: { apiBase: string | undefined; domain: string };
  onWarning: (warning: SandstreamWarning) => void;
  /** How often a readiness wait reads the record without a wake-up (READY_RECHECK_MS by default). */
  readyRecheckMs?: number | undefined;
}

/**
 * The SDK over Redis (inside the cluster): jobs go on the scheduler's BullMQ queue, cancels on
 * the step-dispatcher's, and everything else is read and written in Redis directly, as the
 * services do. The services need not be reachable over any other channel.
 */
export class RedisTransport implements SandstreamTransport, JobTransport {
  readonly redis: RedisClient;
  readonly keys: KeySpace;
  readonly jobs: JobTransport = this;
  readonly sandboxes: RedisSandboxTransport;
  private readonly ownsRedis: boolean;
  private readonly store: JobStore;
  private readonly readers: ReaderPool;
  /** Readiness waits' own blocking readers (sandbox-ready-watch.ts). */
  private readonly readyReaders: ReaderPool;
  private readonly onWarning: (warning: SandstreamWarning) => void;
  private queue: Queue<JobsPayload> | undefined;
  private presence: SchedulerPresence | undefined;
  private cancels: Queue<CancelRequestPayload> | undefined;
  /** The queues' own connection (opened with the first queue): see queueConnection(). */
  private queueRedis: RedisClient | undefined;
  private snapshotRequests: SnapshotRequests | undefined;
  private networkRequests: NetworkUpdateRequests | undefined;

  constructor(options: RedisTransportOptions) {
    this.ownsRedis = options.redis === undefined;
    this.redis =
      options.redis ?? createRedis({ url: options.redisUrl ?? 'redis://127.0.0.1:6379', role: 'producer' });
    // Without a listener ioredis prints every failed reconnect as an "Unhandled error event"
    // trace; the same error already reaches the caller as the rejected command.
    if (this.ownsRedis) this.redis.on('error', () => {});
    this.keys = createKeySpace(options.namespace);
    this.store = new JobStore({ redis: this.redis, keys: this.keys });
    this.onWarning = options.onWarning;
    this.readers = new ReaderPool(this.redis);
    this.readyReaders = new ReaderPool(this.redis);
    const self = this;
    this.sandboxes = new RedisSandboxTransport({
      redis: this.redis,
      keys: this.keys,
      store: this.store,
      commands: new SandboxCommands({ redis: this.redis, keys: this.keys }),
      readers: this.readers,
      preview: options.preview ?? { apiBase: undefined, domain: 'localhost' },
      readiness: {
        redis: this.redis,
        keys: this.keys,
        readers: this.readyReaders,
        recheckMs: options.readyRecheckMs ?? READY_RECHECK_MS,
      },
      submit: (spec) => this.submit(spec),
      requestClose: async (id) => {
        await cancelJob(this.store, await this.cancelQueue(), id, 'user');
      },
      requestPause: async (id) => requestPause(this.store, await this.cancelQueue(), id),
      requestTimeout: async (id, seconds, tenant) =>
        setSandboxTimeout(this.store, await this.cancelQueue(), id, seconds, tenant),
      requestResume: async (id) =>
        resumeSandbox(this.store, await this.jobsQueue(), new DispatchKeys(this.keys), id),
      snapshotRecords: new SnapshotRecords(this.redis, this.keys),
      // Opened on first use: most clients never take a snapshot.
      get snapshotRequests() {
        return self.snapshotRequestsOf();
      },
      get networkRequests() {
        return self.networkRequestsOf();
      },
    });
  }

  /**
   * BullMQ is loaded on the first call that queues something: `exec`, `files`, `status` and the
   * like never do, and loading it cost every CLI command start-up time (issue 33).
   */
  private async jobsQueue(): Promise<Queue<JobsPayload>> {
    if (this.queue) return this.queue;
    const { Queue } = await import('bullmq');
    if (!this.queue) {
      this.queue = new Queue<JobsPayload>(QueueNames.jobs, {
        connection: this.queueConnection(),
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

  private queueConnection(): RedisClient {
    this.queueRedis ??= queueConnection(this.redis);
    return this.queueRedis;
  }

  private networkRequestsOf(): NetworkUpdateRequests {
    this.networkRequests ??= new NetworkUpdateRequests(this.queueConnection(), this.keys);
    return this.networkRequests;
  }

  private snapshotRequestsOf(): SnapshotRequests {
    this.snapshotRequests ??= new SnapshotRequests(this.queueConnection(), this.keys);
    return this.snapshotRequests;
  }

  private async cancelQueue(): Promise<Queue<CancelRequestPayload>> {
    if (this.cancels) return this.cancels;
    const { Queue } = await import('bullmq');
    if (!this.cancels) {
      this.cancels = new Queue<CancelRequestPayload>(QueueNames.dispatchCancel, {
        connection: this.queueConnection(),
        prefix: this.keys.bullPrefix,
      });
      // As for the jobs queue: connection errors reach the caller as rejected calls already.
      this.cancels.on('error', () => {});
    }
    return this.cancels;
  }

  /**
   * A job or a live sandbox's spec through libs/bus submitParsedJob (the path every producer uses). When no scheduler is connected to
   * the namespace the job is still queued, and `onWarning` is told, because otherwise the caller
   * would wait at `queued` with no sign of why.
   */
  async submit(spec: StoredSpec): Promise<SubmitResult> {
    const result = await submitParsedJob(this.store, await this.jobsQueue(), spec);
    const warning = await this.presence?.check();
    if (warning) this.onWarning(warning);
    return result;
  }

  get(jobId: string): Promise<JobRecord | null> {
    return this.store.get(jobId);
  }

  list(options: ListOptions): Promise<JobRecord[]> {
    return this.store.list(options);
  }

  async cancel(jobId: string, reason: string): Promise<CancelResult> {
    return cancelJob(this.store, await this.cancelQueue(), jobId, reason);
  }

  follow(jobId: string, options: FollowOptions): AsyncGenerator<FollowItem, void, undefined> {
    return followJobStream(this.redis, this.keys, jobId, options);
  }

  followPages(jobId: string, options: FollowOptions): AsyncGenerator<FollowItem[], void, undefined> {
    return followJobPages(this.redis, this.keys, jobId, options);
  }

  async close(): Promise<void> {
    this.readers.close();
    this.readyReaders.close();
    await Promise.all([
      this.queue?.close(),
      this.cancels?.close(),
      this.snapshotRequests?.close(),
      this.networkRequests?.close(),
    ]);
    this.queueRedis?.disconnect();
    if (this.ownsRedis) await this.redis.quit();
  }
}
