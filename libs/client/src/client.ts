import type { CancelResult } from '@sandstream/bus';
import {
  BuiltTemplates,
  isTerminal,
  type JobRecord,
  JobStore,
  type KeySpace,
  type RedisClient,
  type SubmitResult,
  VolumeStore,
} from '@sandstream/bus';
import {
  type FollowOptions,
  FollowOptionsSchema,
  type ListOptions,
  ListOptionsSchema,
  parseOptions,
  type SandstreamClientOptions,
  SandstreamClientOptionsSchema,
  SandstreamOptionsError,
  type WaitOptions,
  WaitOptionsSchema,
} from './client-options.js';
import type { FollowItem } from './follow-entry.js';
import { HttpTransport } from './http/http-transport.js';
import { guardInfrastructureErrors } from './infrastructure-errors.js';
import { JobNotFoundError } from './job-not-found.js';
import { RedisTransport } from './redis-transport.js';
import { RedisVolumeTransport } from './redis-volume-transport.js';
import { Sandboxes } from './sandboxes.js';
import { Snapshots } from './snapshots.js';
import { withSubmitSpan } from './submit-span.js';
import { RedisTemplateTransport, Templates } from './templates.js';
import type { SandstreamTransport } from './transport.js';
import { Volumes } from './volumes.js';

export * from './client-options.js';

export class WaitTimeoutError extends Error {
  override readonly name = 'WaitTimeoutError';
}

/**
 * The TypeScript SDK. Every call validates its input first (a bad spec throws JobSpecError
 * naming the field and rule, and nothing is queued), then goes through one transport (transport.ts):
 * Redis when given `redis` / `redisUrl` (inside the cluster; the services need not be reachable
 * over any other channel), the HTTP API when given `url` (from anywhere else). Both offer every
 * method and throw the same errors.
 */
export class SandstreamClient {
  private readonly transport: SandstreamTransport;
  /** The Redis transport itself, when it is the one (its connection and keys are handed out). */
  private readonly redisOnly: RedisTransport | undefined;
  /** Live sandboxes: create, connect, get, list (sandboxes.ts). */
  readonly sandboxes: Sandboxes;
  /** Named storage that outlives sandboxes (docs/volumes.md); over Redis, `volumes.forTenant(t)`. */
  readonly volumes: Volumes;
  /** Snapshots of the caller's tenant: list, get, delete (snapshots.ts). */
  readonly snapshots: Snapshots;
  /**
   * Templates: list (over HTTP the operator's file and the built ones, over Redis the built ones)
   * and delete a built one (templates.ts).
   */
  readonly templates: Templates;

  constructor(options: SandstreamClientOptions = {}) {
    const opts = parseOptions(SandstreamClientOptionsSchema, options, 'SandstreamClient options');
    const onWarning =
      opts.onWarning ?? ((w) => process.emitWarning(w.message, { type: 'SandstreamWarning', code: w.code }));
    if (opts.url !== undefined) {
      const mixed = (['redis', 'redisUrl', 'namespace', 'readyRecheckMs'] as const).filter(
        (k) => opts[k] !== undefined,
      );
      if (mixed.length > 0) {
        throw new SandstreamOptionsError(
          `SandstreamClient options: url (the HTTP API) does not go with ${mixed.join(', ')} (Redis): give one or the other`,
        );
      }
      const http = new HttpTransport({ url: opts.url, apiKey: opts.apiKey });
      this.transport = http;
      this.redisOnly = undefined;
      this.sandboxes = new Sandboxes(this.transport.sandboxes);
      this.volumes = new Volumes(http.volumes);
      this.templates = new Templates(http.templates);
    } else {
      if (opts.apiKey !== undefined)
        throw new SandstreamOptionsError('SandstreamClient options: apiKey needs url (the HTTP API)');
      const redis = new RedisTransport({
        redis: opts.redis,
        redisUrl: opts.redisUrl,
        namespace: opts.namespace,
        readyRecheckMs: opts.readyRecheckMs,
        preview: {
          apiBase: opts.previewUrl ?? process.env.SANDSTREAM_API_URL,
          domain: opts.previewDomain ?? process.env.SANDSTREAM_PREVIEW_DOMAIN ?? 'localhost',
        },
        onWarning,
      });
      this.redisOnly = redis;
      // ioredis's connection errors (MaxRetriesPerRequestError, "Connection is closed.") reach
      // the caller as InfrastructureUnavailableError, as the API's 503 does over HTTP.
      this.transport = {
        jobs: guardInfrastructureErrors(redis.jobs),
        sandboxes: guardInfrastructureErrors(redis.sandboxes),
        close: () => redis.close(),
      };
      this.sandboxes = new Sandboxes(this.transport.sandboxes);
      this.volumes = new Volumes(
        new RedisVolumeTransport({
          store: new VolumeStore(
            redis.redis,
            redis.keys,
            new JobStore({ redis: redis.redis, keys: redis.keys }),
          ),
          sandboxes: this.sandboxes,
          tenant: 'default',
          helperImage: opts.volumeHelperImage ?? 'sandstream/debian:bookworm',
        }),
      );
      this.templates = new Templates(
        guardInfrastructureErrors(new RedisTemplateTransport(new BuiltTemplates(redis.redis, redis.keys))),
      );
    }
    this.snapshots = new Snapshots(this.transport.sandboxes);
  }

  /** Which way this client reaches the deployment. */
  get transportKind(): 'redis' | 'http' {
    return this.redisOnly ? 'redis' : 'http';
  }

  /** The Redis connection (Redis transport only: over HTTP there is none to hand out). */
  get redis(): RedisClient {
    return this.redisTransport('redis').redis;
  }

  /** The namespace's keys (Redis transport only). */
  get keys(): KeySpace {
    return this.redisTransport('keys').keys;
  }

  private redisTransport(what: string): RedisTransport {
    if (this.redisOnly) return this.redisOnly;
    throw new SandstreamOptionsError(
      `client.${what} is only there over Redis; this client talks to the HTTP API`,
    );
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
  submit(input: unknown, source?: string): Promise<SubmitResult> {
    const tenantGiven =
      typeof input === 'object' && input !== null && (input as { tenant?: unknown }).tenant !== undefined;
    return withSubmitSpan(input, source, (spec) => this.transport.jobs.submit(spec, tenantGiven));
  }

  get(jobId: string): Promise<JobRecord | null> {
    return this.transport.jobs.get(jobId);
  }

  async list(options: ListOptions = {}): Promise<JobRecord[]> {
    return this.transport.jobs.list(parseOptions(ListOptionsSchema, options, 'list options'));
  }

  /**
   * Asks to cancel (libs/bus cancelJob): recorded on the job, which ends a job still queued on
   * the spot; a scheduled or starting job is ended by pod-lifecycle before anything starts, and a
   * running one by the step-dispatcher, which kills the running step and ends the job
   * `cancelled` once the agent confirms (or after a short backstop, if it never does).
   */
  cancel(jobId: string, reason = 'cancelled by user'): Promise<CancelResult> {
    return this.transport.jobs.cancel(jobId, reason);
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
    // Parsed on the first next(), as a generator's body runs: a bad option rejects it.
    yield* this.transport.jobs.follow(
      jobId,
      parseOptions(FollowOptionsSchema, followOptions, 'follow options'),
    );
  }

  /**
   * follow() a page at a time: the items of one read (up to 500 stream entries over Redis)
   * together, the same items in the same order. For a reader that forwards them in bulk (the
   * HTTP API writes one page in one socket write) and would otherwise pay an await per item.
   */
  async *followPages(
    jobId: string,
    followOptions: FollowOptions = {},
  ): AsyncGenerator<FollowItem[], void, undefined> {
    yield* this.transport.jobs.followPages(
      jobId,
      parseOptions(FollowOptionsSchema, followOptions, 'follow options'),
    );
  }

  close(): Promise<void> {
    return this.transport.close();
  }
}
