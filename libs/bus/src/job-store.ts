import { randomUUID } from 'node:crypto';
import { type NetworkPolicy, type StepResult, StepResultSchema, StreamLimits } from '@sandstream/wire';
import { busLua } from './bus-lua.js';
import { DispatchKeys } from './dispatch-keys.js';
import { jobFootprint } from './job-footprint.js';
import { JobField, parseJobRecord, parseStepResult, stepResultField } from './job-layout.js';
import {
  type CreateProgress,
  CreateProgressSchema,
  JOB_EVENT_FIELD,
  type JobDisk,
  JobDiskSchema,
  type JobEvent,
  type JobRecord,
  type JobSandbox,
  JobSandboxSchema,
  type JobState,
  JobStateSchema,
} from './job-state.js';
import { createKeySpace, type KeySpace } from './key-space.js';
import { isLiveSandboxSpec, parseStoredSpec, type StoredSpec } from './live-sandbox-spec.js';
import { previewLabel } from './preview-label.js';
import { releasePreviewLabel } from './preview-ports.js';
import { RECORD_CHANGE_FIELD, type RecordChange, RecordChangeSchema } from './record-change.js';
import type { RedisClient } from './redis-connection.js';

const CREATE = busLua.load('job-create');
const TRANSITION = busLua.load('job-transition');
const REQUEST_CANCEL = busLua.load('job-request-cancel');
const SET_IF_EXISTS = busLua.load('job-set-if-exists');
const PROGRESS = busLua.load('job-progress');

export type TransitionResult =
  | { status: 'ok'; from: JobState; event: JobEvent }
  /** The job already was in the target state: repeating a transition changes nothing. */
  | { status: 'noop'; state: JobState }
  /** The job is in a state the caller did not expect (another replica got there first). */
  | { status: 'conflict'; state: JobState }
  | { status: 'missing' };

export type CancelResult =
  | { status: 'requested'; state: JobState }
  /** Cancelled on the spot: nothing had started yet. */
  | { status: 'cancelled' }
  | { status: 'already-requested'; state: JobState }
  | { status: 'terminal'; state: JobState }
  | { status: 'missing' };

export interface TransitionOptions {
  reason?: string;
  /** Record where the sandbox lives in the same atomic step. */
  sandbox?: JobSandbox;
  /** A live sandbox that pauses: when (epoch ms), in the same atomic step. */
  pausedAt?: number;
}

export interface ListOptions {
  tenant?: string;
  state?: JobState;
  /** Newest first; at most this many (default 100, max 1000). */
  limit?: number;
}

/** A deleted job whose index entries are to go (JobStore.dropIndexEntries). */
export interface DroppedJob {
  jobId: string;
  /** Its tenant, when known: its tenant index entry and preview label go too. */
  tenant?: string | undefined;
}

export interface JobStoreOptions {
  redis: RedisClient;
  keys?: KeySpace;
  /** Injectable clock for tests. */
  now?: () => number;
}

/**
 * The job records: one Redis hash per job plus per-tenant and per-state indexes. Every state
 * change is a compare-and-set in Lua that also appends a `job` entry to the job's own events
 * stream, so a follower of `sandbox:{jobId}:events` reads output and state changes in order.
 */
export class JobStore {
  readonly redis: RedisClient;
  readonly keys: KeySpace;
  private readonly now: () => number;

  constructor(options: JobStoreOptions) {
    this.redis = options.redis;
    this.keys = options.keys ?? createKeySpace();
    this.now = options.now ?? Date.now;
  }

  /**
   * Creates the record in state `queued`. With an id that already exists nothing is written and
   * `created` is false: submitting the same id twice makes one job.
   */
  async create(spec: StoredSpec): Promise<{ created: boolean; jobId: string }> {
    const parsed = parseStoredSpec(spec);
    const kind = isLiveSandboxSpec(parsed) ? 'sandbox' : 'job';
    const jobId = parsed.id ?? randomUUID();
    const now = this.now();
    const stored = { ...parsed, id: jobId };
    const event: JobEvent = {
      type: 'created',
      jobId,
      tenant: parsed.tenant,
      from: null,
      to: 'queued',
      at: now,
    };
    const json = JSON.stringify(event);
    const created = await CREATE.run<number>(
      this.redis,
      [this.keys.job(jobId), this.keys.sandbox(jobId).events],
      [
        jobId,
        parsed.tenant,
        JSON.stringify(stored),
        now,
        json,
        StreamLimits.eventStreamMaxLength,
        kind,
        this.keys.namespace,
      ],
    );
    if (created !== 1) return { created: false, jobId };
    // Separate commands, not one pipeline: on a Cluster these keys live in different slots.
    await Promise.all([
      this.redis.zadd(this.keys.jobsByTenant(parsed.tenant), now, jobId),
      this.redis.zadd(this.keys.jobsByState('queued'), now, jobId),
      this.publishLifecycle(json),
    ]);
    return { created: true, jobId };
  }

  async get(jobId: string): Promise<JobRecord | null> {
    const hash = await this.redis.hgetall(this.keys.job(jobId));
    return parseJobRecord(hash);
  }

  /** The parsed spec of a job (re-validated, so a record edited by hand cannot smuggle bad input). */
  async getSpec(jobId: string): Promise<StoredSpec | null> {
    const raw = await this.redis.hget(this.keys.job(jobId), JobField.spec);
    return raw === null ? null : parseStoredSpec(JSON.parse(raw));
  }

  /**
   * A live sandbox's network policy as changed while it runs (network-requests.ts): written into
   * its spec, so a resume or restart resolves it again (and narrows it again under its template).
   */
  async setSandboxNetwork(jobId: string, network: NetworkPolicy): Promise<void> {
    const key = this.keys.job(jobId);
    const raw = await this.redis.hget(key, JobField.spec);
    if (raw === null) return;
    const spec = JSON.parse(raw) as Record<string, unknown>;
    await this.redis.hset(key, JobField.spec, JSON.stringify({ ...spec, network }));
  }

  async list(options: ListOptions = {}): Promise<JobRecord[]> {
    const limit = Math.min(Math.max(options.limit ?? 100, 1), 1000);
    const index = options.tenant
      ? this.keys.jobsByTenant(options.tenant)
      : options.state
        ? this.keys.jobsByState(options.state)
        : null;
    if (index === null) throw new Error('list needs a tenant or a state');
    // Indexes are updated after the atomic part of a transition, so an entry may be stale;
    // each record is re-read and filtered here. Over-fetch a little when filtering by both.
    const ids = await this.redis.zrevrange(
      index,
      0,
      (options.tenant && options.state ? limit * 4 : limit) - 1,
    );
    const hashes = await Promise.all(ids.map((id) => this.redis.hgetall(this.keys.job(id))));
    const records: JobRecord[] = [];
    for (const hash of hashes) {
      const record = parseJobRecord(hash);
      if (!record) continue;
      if (options.state && record.state !== options.state) continue;
      if (options.tenant && record.tenant !== options.tenant) continue;
      records.push(record);
      if (records.length >= limit) break;
    }
    return records;
  }

  /**
   * Moves a job from one of `from` to `to` atomically. Repeating a transition that already
   * happened is a no-op; a job in any other state is left alone and reported as a conflict.
   */
  async transition(
    jobId: string,
    from: readonly JobState[],
    to: JobState,
    options: TransitionOptions = {},
  ): Promise<TransitionResult> {
    const now = this.now();
    const fields: string[] = [];
    if (options.sandbox)
      fields.push(JobField.sandbox, JSON.stringify(JobSandboxSchema.parse(options.sandbox)));
    if (options.pausedAt !== undefined) fields.push(JobField.pausedAt, String(options.pausedAt));
    const reply = await TRANSITION.run<string[]>(
      this.redis,
      [this.keys.job(jobId), this.keys.sandbox(jobId).events],
      [
        to,
        now,
        (options.reason ?? '').slice(0, 4096),
        StreamLimits.eventStreamMaxLength,
        from.length,
        ...from,
        ...fields,
      ],
    );
    const [status, state, json] = reply;
    if (status === 'missing') return { status: 'missing' };
    if (status === 'noop') return { status: 'noop', state: JobStateSchema.parse(state) };
    if (status === 'conflict') return { status: 'conflict', state: JobStateSchema.parse(state) };
    if (status === 'forbidden')
      throw new Error(`job ${jobId}: ${state} -> ${to} is not an allowed transition`);
    const previous = JobStateSchema.parse(state);
    await this.indexTransition(jobId, previous, to, now, json as string);
    return { status: 'ok', from: previous, event: JSON.parse(json as string) as JobEvent };
  }

  /**
   * The cross-slot half of a transition: indexes and the lifecycle stream (idempotent). Public
   * for the scripts elsewhere in libs/bus that move a state themselves (sandbox-pause.ts).
   */
  async indexTransition(
    jobId: string,
    from: JobState,
    to: JobState,
    now: number,
    eventJson: string,
  ): Promise<void> {
    await Promise.all([
      this.redis.zrem(this.keys.jobsByState(from), jobId),
      this.redis.zadd(this.keys.jobsByState(to), now, jobId),
      this.publishLifecycle(eventJson),
    ]);
  }

  /**
   * Sets the cancel flag. A job still `queued` is cancelled in the same script (nothing holds
   * it yet); later states are cancelled by whichever service holds the job (pod-lifecycle,
   * step-dispatcher), which check the flag (docs/services.md, "Who moves job state").
   */
  async requestCancel(jobId: string, reason = 'cancelled by request'): Promise<CancelResult> {
    const now = this.now();
    const [status, state, json, transitionJson] = await REQUEST_CANCEL.run<string[]>(
      this.redis,
      [this.keys.job(jobId), this.keys.sandbox(jobId).events],
      [reason.slice(0, 4096), now, StreamLimits.eventStreamMaxLength],
    );
    if (status === 'missing') return { status: 'missing' };
    const current = JobStateSchema.parse(state);
    if (status === 'terminal') return { status: 'terminal', state: current };
    if (status === 'repeat') return { status: 'already-requested', state: current };
    await this.publishLifecycle(json as string);
    if (status === 'cancelled') {
      // Queued, or a paused sandbox: `current` is the state it was cancelled from.
      await this.indexTransition(jobId, current, 'cancelled', now, transitionJson as string);
      return { status: 'cancelled' };
    }
    return { status: 'requested', state: current };
  }

  /**
   * A `progress` event on a starting job's timeline (an image pull advancing), with `message`
   * as its reason. Not on `events:lifecycle`: it is about this one create, for whoever follows
   * it. False when the job is gone or no longer starting.
   */
  async recordProgress(jobId: string, progress: CreateProgress, message: string): Promise<boolean> {
    const parsed = CreateProgressSchema.parse(progress);
    const appended = await PROGRESS.run<number>(
      this.redis,
      [this.keys.job(jobId), this.keys.sandbox(jobId).events],
      [JSON.stringify(parsed), message.slice(0, 4096), this.now(), StreamLimits.eventStreamMaxLength],
    );
    return appended === 1;
  }

  async isCancelRequested(jobId: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys.job(jobId), JobField.cancelRequested)) === 1;
  }

  /** One step's recorded result, if any. */
  async getStepResult(jobId: string, stepId: string): Promise<StepResult | undefined> {
    return parseStepResult(await this.redis.hget(this.keys.job(jobId), stepResultField(stepId)));
  }

  /** Records one step's result on the record (job-layout's step field); false when the job is gone. */
  async recordStepResult(jobId: string, result: StepResult): Promise<boolean> {
    const parsed = StepResultSchema.parse(result);
    if (parsed.stepId === null) throw new Error('recordStepResult: result.stepId must not be null');
    const done = await SET_IF_EXISTS.run<number>(
      this.redis,
      [this.keys.job(jobId)],
      [stepResultField(parsed.stepId), JSON.stringify(parsed)],
    );
    return done === 1;
  }

  /**
   * A live sandbox the dispatcher decided to close (`lifetime`; `idle` is set by its own script):
   * from here on it takes no more commands. False when the record is gone.
   */
  async markClosing(jobId: string, reason: string): Promise<boolean> {
    const marked =
      (await SET_IF_EXISTS.run<number>(this.redis, [this.keys.job(jobId)], [JobField.closing, reason])) === 1;
    if (marked) await this.publishChange({ jobId, what: 'closing' });
    return marked;
  }

  /** A pausing sandbox's kept files (SandboxFilesKeeper's reference); false when the job is gone. */
  async setPausedFiles(jobId: string, kept: string): Promise<boolean> {
    return (
      (await SET_IF_EXISTS.run<number>(this.redis, [this.keys.job(jobId)], [JobField.pausedFiles, kept])) ===
      1
    );
  }

  /** Why this life of a live sandbox cannot pause (pod-lifecycle, at its start); false when the job is gone. */
  async setUnpausable(jobId: string, why: string): Promise<boolean> {
    return (
      (await SET_IF_EXISTS.run<number>(this.redis, [this.keys.job(jobId)], [JobField.unpausable, why])) === 1
    );
  }

  /** A paused sandbox's files are back in its new sandbox, or discarded: the reference goes. */
  async clearPausedFiles(jobId: string): Promise<void> {
    await this.redis.hdel(this.keys.job(jobId), JobField.pausedFiles);
  }

  /** A paused sandbox no longer runs anywhere: where it ran is forgotten (a resume starts clean). */
  async clearSandbox(jobId: string): Promise<void> {
    await this.redis.hdel(this.keys.job(jobId), JobField.sandbox, JobField.readyAt);
  }

  /** Records its sandbox's disk use as just measured (read by stats()); false when the job is gone. */
  async recordDisk(jobId: string, disk: JobDisk): Promise<boolean> {
    const value = JSON.stringify(JobDiskSchema.parse(disk));
    return (
      (await SET_IF_EXISTS.run<number>(this.redis, [this.keys.job(jobId)], [JobField.disk, value])) === 1
    );
  }

  /** Records where the job's sandbox lives; false when the job is gone. */
  async setSandbox(jobId: string, sandbox: JobSandbox): Promise<boolean> {
    const done = await SET_IF_EXISTS.run<number>(
      this.redis,
      [this.keys.job(jobId)],
      [JobField.sandbox, JSON.stringify(JobSandboxSchema.parse(sandbox))],
    );
    return done === 1;
  }

  /**
   * Removes the job's keys (jobFootprint: the record, its dispatch state and log-archive marker,
   * its sandbox's named keys and preview hash; the per-use ones are the reaper's orphan-key
   * pass's, or freeSandboxFootprint's) and its index entries (the preview label's too).
   */
  async delete(jobId: string, tenant?: string): Promise<void> {
    await Promise.all([
      // One slot: the record and the sandbox keys share the job's hash tag.
      this.redis.unlink(...jobFootprint(this.keys, new DispatchKeys(this.keys), jobId).keys),
      this.dropIndexEntries([{ jobId, tenant }]),
    ]);
  }

  /**
   * Removes deleted jobs' entries from every state index and their tenants' indexes, and their
   * preview labels' entries (if a destroy left one: a URL made in a race with it). The reaper
   * runs it for a batch of jobs its delete script removed: each index is a key in a slot of its
   * own, so no script can take its entry with the record, but one ZREM per index names every job
   * of the batch (9 + tenants commands for the batch instead of 11 per job). Idempotent.
   */
  async dropIndexEntries(jobs: readonly DroppedJob[]): Promise<void> {
    if (jobs.length === 0) return;
    const ids = jobs.map((job) => job.jobId);
    const byTenant = new Map<string, string[]>();
    for (const { jobId, tenant } of jobs) {
      if (tenant) byTenant.set(tenant, [...(byTenant.get(tenant) ?? []), jobId]);
    }
    await Promise.all([
      ...JobStateSchema.options.map((state) => this.redis.zrem(this.keys.jobsByState(state), ...ids)),
      ...[...byTenant].map(([tenant, tenantIds]) =>
        this.redis.zrem(this.keys.jobsByTenant(tenant), ...tenantIds),
      ),
      ...jobs.flatMap(({ jobId, tenant }) =>
        tenant ? [releasePreviewLabel(this.redis, this.keys, previewLabel(tenant, jobId), jobId)] : [],
      ),
      // Lists drop it live (record-change.ts); a repeat for one already dropped is harmless.
      ...jobs.map(({ jobId, tenant }) =>
        this.publishChange({ jobId, ...(tenant ? { tenant } : {}), what: 'removed' }),
      ),
    ]);
  }

  /**
   * Tells the observers of `events:lifecycle` that a record changed in a way a list shows but no
   * transition announced (record-change.ts). After the change's own write, separately: the
   * stream is in another slot. Best effort as the transitions' entries are: a lost one leaves a
   * list stale until its next change or reload, never a record wrong.
   */
  async publishChange(change: Omit<RecordChange, 'at'>): Promise<void> {
    const parsed = RecordChangeSchema.parse({ ...change, at: this.now() });
    await this.redis.xadd(
      this.keys.lifecycleStream,
      'MAXLEN',
      '~',
      StreamLimits.lifecycleStreamMaxLength,
      '*',
      RECORD_CHANGE_FIELD,
      JSON.stringify(parsed),
    );
  }

  private async publishLifecycle(json: string): Promise<void> {
    await this.redis.xadd(
      this.keys.lifecycleStream,
      'MAXLEN',
      '~',
      StreamLimits.lifecycleStreamMaxLength,
      '*',
      JOB_EVENT_FIELD,
      json,
    );
  }
}
