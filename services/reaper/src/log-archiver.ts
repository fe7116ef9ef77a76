import {
  type ArchivedEntry,
  type ArchiveGap,
  ArchiveHeaders,
  compareEntryIds,
  decodeJobEventFields,
  isTerminal,
  JobField,
  JobStateSchema,
  type KeySpace,
  type LogArchiveNames,
  logArchiveNames,
  nextEntryId,
  type RedisClient,
} from '@sandstream/bus';
import { sleep } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';
import {
  DiscardPolicy,
  headers,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  NatsError,
  nanos,
  RetentionPolicy,
  StorageType,
} from 'nats';
import type { NatsSource } from './nats-link.js';
import { LOG_ARCHIVE_LEASE_RELEASE, LOG_ARCHIVE_LEASE_RENEW } from './reap-scripts.js';

export interface LogArchiverOptions {
  /** Per-job commands (never blocking): reads, trims, leases, markers. */
  redis: RedisClient;
  /** A dedicated connection: discovery's XREADGROUP BLOCK on `events:lifecycle` holds it. */
  lifecycleRedis: RedisClient;
  keys: KeySpace;
  /** The current NATS connection, whichever it is after an outage (nats-link.ts). */
  nats: NatsSource;
  logger: Logger;
  /** This replica's name: lease owner and consumer in the discovery group. */
  consumer: string;
  /** First subject token (NATS_SUBJECT_PREFIX). */
  subjectPrefix?: string;
  /** JetStream retention of the archive stream. */
  maxAgeMs?: number;
  maxBytes?: number;
  /** Archived entries left in a job's Redis stream after trimming, for live followers. */
  keepEntries?: number;
  /** Jobs this replica archives at once. */
  maxJobs?: number;
  /** XREAD COUNT per poll; a full read means "busy": the job is polled again at once. */
  readCount?: number;
  /** Limits of one JetStream message. */
  batchEntries?: number;
  batchBytes?: number;
  /** How often an idle job's stream is polled. */
  idlePollMs?: number;
  /** A job lease lasts this long unless renewed; a dead replica's jobs move after it. */
  leaseMs?: number;
  /** Lease renewal and claiming of new jobs. */
  tickMs?: number;
  /**
   * A finished job whose agent still heart-beats may print a last line or two: its log is
   * completed once the heartbeat is gone, or this long after the end.
   */
  completeGraceMs?: number;
  /** Lifecycle entries another replica read but never acknowledged are taken over after this long. */
  claimIdleMs?: number;
  metrics?: { add(n: number, attrs: { what: 'entries' | 'gaps' | 'jobs' }): void };
}

/** Where a job's archive stands: what its subject's last message says. */
interface Position {
  /** The last stream entry accounted for (archived, or lost in a recorded gap); '0-0' before any. */
  cursor: string;
  /** How many of the stream's entries, from its first, are accounted for. */
  entries: number;
  /** JetStream sequence of the subject's last message (0: none), for expect.lastSubjectSequence. */
  seq: number;
  complete: boolean;
  /** The highest XDEL'd entry id already recorded as a gap ('0-0': none). */
  deletedSeen: string;
  /** The job record's createdAt ('' unknown): messages carry it (ArchiveHeaders.incarnation). */
  incarnation: string;
}

/** One atomic look at a job: its stream's bookkeeping, the entries after the cursor, the record. */
interface Poll {
  exists: boolean;
  entries: ArchivedEntry[];
  /** XINFO STREAM: entries ever added, current length, first entry, highest XDEL'd id (Redis 7). */
  added: number | undefined;
  length: number;
  firstEntry: string | null;
  maxDeleted: string | undefined;
  /** The job record's state (null: no record) and end. */
  state: string | null;
  finishedAt: number | undefined;
  heartbeat: boolean;
}

/** Someone else's message reached the subject first (a competing replica, or our own retried one). */
class ArchiveConflict extends Error {}

type StreamReply = [string, ArchivedEntry[]][] | null;
type ExecReply = [Error | null, unknown][] | null;

const DISCOVERY_GROUP = 'log-archive';
/**
 * How often discovery also takes every starting or running job from the state index: a job whose
 * lifecycle entries the capped stream dropped before discovery read them (the archiver down
 * long enough) would otherwise never be archived, and its agent would wait at its high water mark.
 */
const SWEEP_MS = 30_000;
/** An idle job's polls back off to this; new entries bring the pace back to idlePollMs. */
const MAX_IDLE_POLL_MS = 2_000;
/** The per-job marker outlives any sensible retention; the reaper deletes it with the job's keys. */
const MARKER_TTL_SECONDS = 30 * 86_400;
/** JetStream API error codes. */
const NO_MESSAGE_FOUND = 10037;
const STREAM_NOT_FOUND = 10059;
const WRONG_LAST_SEQUENCE = 10071;

/**
 * Archives every job's events stream (`sandbox:{jobId}:events`) into one JetStream subject per
 * job, in order and exactly once, and trims from Redis only what JetStream acknowledged, so the
 * Redis stream stays bounded while nothing is lost (docs/log-archive.md).
 *
 * - Discovery: a consumer group on `events:lifecycle` adds each job to `<ns>:logs:active` and
 *   marks it `pending` (the reaper keeps a pending job's keys).
 * - Sharing: a job is archived by whichever replica holds its lease; leases are renewed every
 *   tick and a dead replica's jobs move after `leaseMs`.
 * - Exactly once: every message carries the last entry id it accounts for; a new owner resumes
 *   from the subject's last message, and publishes with `expect.lastSubjectSequence`, so a
 *   second writer on the same job (an expired lease, a retried publish) fails instead of
 *   duplicating, and resumes from what JetStream holds.
 * - Loss is recorded, never silent: entries trimmed or deleted before they were archived become
 *   a gap marker message (and an error log).
 * - End: once the job's record is terminal and its stream drained, a final `complete` message,
 *   the marker becomes `done`, and the job is forgotten.
 */
export class LogArchiver {
  private readonly controller = new AbortController();
  private readonly names: LogArchiveNames;
  private readonly jobs = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private readonly encoder = new TextEncoder();
  private run: Promise<void> | undefined;
  /** JetStream handles of the connection they were made on: a rebuilt connection gets new ones. */
  private jet: { nc: NatsConnection; js: JetStreamClient; jsm: JetStreamManager } | undefined;
  /** What this replica did, for tests and /info. */
  readonly stats = { entries: 0, messages: 0, gaps: 0, completed: 0, conflicts: 0 };

  constructor(private readonly options: LogArchiverOptions) {
    this.names = logArchiveNames({
      prefix: options.subjectPrefix ?? 'sandstream',
      namespace: options.keys.namespace,
    });
  }

  get streamName(): string {
    return this.names.stream;
  }

  /** Jobs this replica archives right now. */
  get activeJobs(): number {
    return this.jobs.size;
  }

  start(): void {
    this.run ??= this.main();
  }

  /** Stops every loop at its next step and hands the leases back, so another replica goes on at once. */
  async stop(): Promise<void> {
    this.controller.abort();
    await this.run;
  }

  private get signal(): AbortSignal {
    return this.controller.signal;
  }

  private get leaseMs(): number {
    return this.options.leaseMs ?? 15_000;
  }

  private leaseKey(jobId: string): string {
    return this.options.keys.lock(`log-archive:${jobId}`);
  }

  private async main(): Promise<void> {
    // Discovery needs only Redis: while NATS is down (even at start-up) new jobs are still marked
    // pending, so the reaper keeps their keys until the archive has them.
    const discovery = this.discoverLoop();
    const { logger } = this.options;
    for (let failures = 0; !this.signal.aborted; failures++) {
      try {
        await this.ensureStream();
        break;
      } catch (err) {
        if (failures === 0)
          logger.warn({ err: (err as Error).message }, 'log archive: JetStream not ready; retrying');
        await sleep(Math.min(1000 * (failures + 1), 10_000), this.signal);
      }
    }
    await Promise.all([discovery, this.leaseLoop()]);
    await Promise.all([...this.jobs.values()].map((j) => j.done));
  }

  /** The archive stream, created or brought to the configured limits. */
  private async ensureStream(): Promise<void> {
    const { jsm } = await this.jetstream();
    const limits = {
      max_age: nanos(this.options.maxAgeMs ?? 7 * 86_400_000),
      max_bytes: this.options.maxBytes ?? 10 * 1024 ** 3,
    };
    try {
      const info = await jsm.streams.info(this.names.stream);
      if (info.config.max_age !== limits.max_age || info.config.max_bytes !== limits.max_bytes) {
        await jsm.streams.update(this.names.stream, { ...info.config, ...limits });
      }
    } catch (err) {
      if (apiErrorCode(err) !== STREAM_NOT_FOUND) throw err;
      await jsm.streams.add({
        name: this.names.stream,
        subjects: [this.names.subjects],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        // A publish retried after a lost acknowledgement is dropped by its Nats-Msg-Id.
        duplicate_window: nanos(120_000),
        ...limits,
      });
    }
  }

  // ---- discovery -------------------------------------------------------------------------

  private async discoverLoop(): Promise<void> {
    const { logger } = this.options;
    while (!this.signal.aborted) {
      try {
        await this.ensureGroup();
        await this.discover('0');
        let swept = 0;
        while (!this.signal.aborted) {
          if (Date.now() - swept >= SWEEP_MS) {
            await this.sweepLiveJobs();
            swept = Date.now();
          }
          await this.claimStaleDiscovery();
          await this.discover('>');
        }
      } catch (err) {
        if (this.signal.aborted) break;
        logger.warn({ err: (err as Error).message }, 'log archive discovery error; retrying');
        await sleep(1000, this.signal);
      }
    }
  }

  private async ensureGroup(): Promise<void> {
    try {
      // `$`: jobs from now on; jobs older than the archive are not in it (and not held for it).
      await this.options.lifecycleRedis.xgroup(
        'CREATE',
        this.options.keys.lifecycleStream,
        DISCOVERY_GROUP,
        '$',
        'MKSTREAM',
      );
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('BUSYGROUP')) throw err;
    }
  }

  private async discover(id: '0' | '>'): Promise<void> {
    const reply = (await this.options.lifecycleRedis.call(
      'XREADGROUP',
      'GROUP',
      DISCOVERY_GROUP,
      this.options.consumer,
      'COUNT',
      '200',
      ...(id === '>' ? ['BLOCK', '1000'] : []),
      'STREAMS',
      this.options.keys.lifecycleStream,
      id,
    )) as StreamReply;
    await this.noteJobs(reply?.[0]?.[1] ?? []);
  }

  private async claimStaleDiscovery(): Promise<void> {
    const [, entries] = (await this.options.redis.call(
      'XAUTOCLAIM',
      this.options.keys.lifecycleStream,
      DISCOVERY_GROUP,
      this.options.consumer,
      String(this.options.claimIdleMs ?? 30_000),
      '0',
      'COUNT',
      '200',
    )) as [string, (ArchivedEntry | null)[]];
    await this.noteJobs(entries.filter((e): e is ArchivedEntry => e !== null && e[1] !== null));
  }

  /** Every starting or running job into the active set (and pending), as noteJobs does for new ones. */
  private async sweepLiveJobs(): Promise<void> {
    const { redis, keys } = this.options;
    const now = Date.now();
    for (const state of ['starting', 'running'] as const) {
      const jobIds = await redis.zrange(keys.jobsByState(state), 0, -1);
      for (const jobId of jobIds) {
        await redis.set(keys.jobLogArchive(jobId), 'pending', 'EX', MARKER_TTL_SECONDS, 'NX');
        await redis.zadd(keys.logArchiveActive, 'NX', now, jobId);
      }
    }
  }

  /** Adds the jobs named by lifecycle entries to the active set and marks them pending; idempotent. */
  private async noteJobs(entries: ArchivedEntry[]): Promise<void> {
    if (entries.length === 0) return;
    const { redis, keys } = this.options;
    const jobIds = new Set<string>();
    for (const [, fields] of entries) {
      const event = decodeJobEventFields(fields);
      if (event) jobIds.add(event.jobId);
    }
    const now = Date.now();
    // One command at a time per key, not a pipeline: on a Cluster these keys live in many slots.
    await Promise.all(
      [...jobIds].map((jobId) =>
        Promise.all([
          // NX: a `done` job seen again (a re-delivered entry) stays done.
          redis.set(keys.jobLogArchive(jobId), 'pending', 'EX', MARKER_TTL_SECONDS, 'NX'),
          redis.zadd(keys.logArchiveActive, 'NX', now, jobId),
        ]),
      ),
    );
    await redis.xack(keys.lifecycleStream, DISCOVERY_GROUP, ...entries.map(([id]) => id));
  }

  // ---- leases ----------------------------------------------------------------------------

  private async leaseLoop(): Promise<void> {
    let failures = 0;
    while (!this.signal.aborted) {
      try {
        await this.renewLeases();
        await this.claimJobs();
        failures = 0;
      } catch (err) {
        if (failures++ === 0) {
          this.options.logger.warn({ err: (err as Error).message }, 'log archive leases: Redis error');
        }
      }
      await sleep(this.options.tickMs ?? 1000, this.signal);
    }
  }

  private async renewLeases(): Promise<void> {
    const { redis, consumer, logger } = this.options;
    await Promise.all(
      [...this.jobs].map(async ([jobId, job]) => {
        const renewed = await LOG_ARCHIVE_LEASE_RENEW.run<number>(
          redis,
          [this.leaseKey(jobId)],
          [consumer, this.leaseMs],
        );
        if (renewed === 1) return;
        // Another replica holds it now (our lease lapsed): it goes on from what JetStream holds.
        logger.warn({ jobId }, 'log archive: lease lost; another replica takes the job');
        job.controller.abort();
      }),
    );
  }

  private async claimJobs(): Promise<void> {
    const { redis, consumer } = this.options;
    const free = (this.options.maxJobs ?? 2000) - this.jobs.size;
    if (free <= 0) return;
    const ids = await redis.zrange(this.options.keys.logArchiveActive, 0, 9999);
    const candidates = shuffle(ids.filter((id) => !this.jobs.has(id)));
    // At most half of what is waiting per tick: replicas ticking at the same time split the work.
    const take = candidates.slice(0, Math.min(free, Math.max(4, Math.ceil(candidates.length / 2))));
    await Promise.all(
      take.map(async (jobId) => {
        const taken = await redis.set(this.leaseKey(jobId), consumer, 'PX', this.leaseMs, 'NX');
        if (taken === 'OK' && !this.signal.aborted) this.startJob(jobId);
      }),
    );
  }

  private startJob(jobId: string): void {
    const controller = new AbortController();
    const signal = AbortSignal.any([this.signal, controller.signal]);
    const done = this.archiveJob(jobId, signal).finally(() => {
      if (this.jobs.get(jobId)?.controller === controller) this.jobs.delete(jobId);
    });
    this.jobs.set(jobId, { controller, done });
  }

  // ---- one job ---------------------------------------------------------------------------

  private async archiveJob(jobId: string, signal: AbortSignal): Promise<void> {
    const { redis, consumer, logger } = this.options;
    let failures = 0;
    let conflicts = 0;
    while (!signal.aborted) {
      try {
        if (await this.follow(jobId, signal)) {
          await this.forget(jobId);
          return;
        }
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof ArchiveConflict) {
          // Resume from what JetStream holds: the other writer's messages count, ours do not.
          this.stats.conflicts++;
          logger.debug({ jobId, why: err.message }, 'log archive: subject moved on; resuming from it');
          // At once the first times; a conflict that keeps coming (a message id the duplicate
          // window remembers while the subject does not move) must not become a busy loop.
          if (++conflicts > 3) await sleep(Math.min(100 * conflicts, 2_000), signal);
          continue;
        }
        if (failures++ % 30 === 0) {
          logger.warn({ jobId, err: (err as Error).message }, 'log archive: job error; retrying');
        }
        await sleep(Math.min(500 * failures, 10_000), signal);
      }
    }
    // Stopped (or the lease was lost): hand the job back at once rather than after the lease expires.
    await LOG_ARCHIVE_LEASE_RELEASE.run(redis, [this.leaseKey(jobId)], [consumer]).catch(() => undefined);
  }

  /** Archives the job from where its subject stands; true once its log is complete. */
  private async follow(jobId: string, signal: AbortSignal): Promise<boolean> {
    const { redis, keys } = this.options;
    const events = keys.sandbox(jobId).events;
    const readCount = this.options.readCount ?? 1000;
    const trim = new TrimWindow(this.options.keepEntries ?? 2000);
    const incarnation = (await redis.hget(keys.job(jobId), JobField.createdAt)) ?? '';
    let pos = await this.position(jobId, incarnation);
    if (pos.complete) return true;
    let seenAdded: number | undefined;
    const idlePollMs = this.options.idlePollMs ?? 150;
    let idleMs = idlePollMs;
    while (!signal.aborted) {
      const poll = await this.poll(jobId, pos.cursor, readCount);
      if (!poll.exists) {
        const live = poll.state !== null && !isTerminalState(poll.state);
        if (live) {
          await sleep(this.options.idlePollMs ?? 150, signal);
          continue;
        }
        // Gone with the job: whatever was not archived yet is lost (unless it was all read).
        if (seenAdded === undefined || pos.entries < seenAdded) {
          pos = await this.publishGap(jobId, pos, {
            after: pos.cursor,
            before: null,
            lost: seenAdded === undefined ? null : seenAdded - pos.entries,
            reason: 'the events stream was deleted before it was archived',
          });
        }
        await this.publishComplete(jobId, pos);
        return true;
      }
      seenAdded = poll.added;
      const gap = this.lossSince(pos, poll);
      if (gap) {
        pos = await this.publishGap(
          jobId,
          { ...pos, deletedSeen: gap.deletedSeen ?? pos.deletedSeen },
          gap.gap,
          gap.entries,
        );
      }
      if (poll.entries.length > 0) {
        pos = await this.archive(jobId, pos, poll.entries, trim);
        const minId = trim.minId(pos.cursor);
        if (minId) await redis.xtrim(events, 'MINID', '~', minId);
        if (poll.entries.length >= readCount) continue; // busy: read on at once
      } else if (this.finished(poll)) {
        // Drained in the same atomic look that saw the record terminal: the terminal lifecycle
        // entry is at or before the cursor, archived.
        await this.publishComplete(jobId, pos);
        return true;
      }
      // A quiet job (an idle live sandbox may stay so for hours) is looked at less and less often.
      idleMs = poll.entries.length > 0 ? idlePollMs : Math.min(idleMs * 2, MAX_IDLE_POLL_MS);
      await sleep(idleMs, signal);
    }
    return false;
  }

  private finished(poll: Poll): boolean {
    if (poll.state !== null && !isTerminalState(poll.state)) return false;
    if (!poll.heartbeat) return true;
    const grace = this.options.completeGraceMs ?? 10_000;
    return Date.now() - (poll.finishedAt ?? 0) > grace;
  }

  /**
   * Entries that left the stream before they were archived. Trimming only ever removes a prefix,
   * so the stream holds the last `length` of the `added` entries: more than `pos.entries`
   * removed means the difference was never archived. (Redis 7's max-deleted-entry-id counts only
   * XDEL, not trimming, so it serves for deletions in the middle.)
   */
  private lossSince(
    pos: Position,
    poll: Poll,
  ): { gap: ArchiveGap; entries: number; deletedSeen?: string } | undefined {
    if (poll.added !== undefined) {
      const removed = poll.added - poll.length;
      if (poll.added < pos.entries) {
        return {
          gap: {
            after: pos.cursor,
            before: poll.firstEntry,
            lost: null,
            reason: 'the events stream was replaced (deleted and written again) before it was archived',
          },
          entries: removed,
        };
      }
      if (removed > pos.entries) {
        return {
          gap: {
            after: pos.cursor,
            before: poll.firstEntry,
            lost: removed - pos.entries,
            reason: 'trimmed from Redis before it was archived',
          },
          entries: removed,
        };
      }
    }
    if (
      poll.maxDeleted !== undefined &&
      compareEntryIds(poll.maxDeleted, pos.cursor) > 0 &&
      compareEntryIds(poll.maxDeleted, pos.deletedSeen) > 0
    ) {
      return {
        gap: {
          after: pos.cursor,
          before: poll.firstEntry,
          lost: null,
          reason: `entries up to ${poll.maxDeleted} were deleted before they were archived`,
        },
        entries: pos.entries,
        deletedSeen: poll.maxDeleted,
      };
    }
    return undefined;
  }

  /** XINFO + XREAD + the record, in one MULTI (one slot): a consistent view of the job. */
  private async poll(jobId: string, cursor: string, count: number): Promise<Poll> {
    const { redis, keys } = this.options;
    const sk = keys.sandbox(jobId);
    const reply = (await redis
      .multi()
      .call('XINFO', 'STREAM', sk.events)
      .call('XREAD', 'COUNT', String(count), 'STREAMS', sk.events, cursor)
      .hmget(keys.job(jobId), JobField.state, JobField.finishedAt)
      .exists(sk.heartbeat)
      .exec()) as ExecReply;
    if (!reply) throw new Error('MULTI aborted');
    const [info, read, record, heartbeat] = reply as [
      [Error | null, unknown[] | null],
      [Error | null, StreamReply],
      [Error | null, [string | null, string | null]],
      [Error | null, number],
    ];
    for (const [err] of [read, record, heartbeat]) if (err) throw err;
    const [state, finishedAt] = record[1];
    const base = {
      state,
      finishedAt: finishedAt ? Number(finishedAt) : undefined,
      heartbeat: heartbeat[1] === 1,
    };
    if (info[0]) {
      if (!/no such key/i.test(info[0].message)) throw info[0];
      return {
        ...base,
        exists: false,
        entries: [],
        added: undefined,
        length: 0,
        firstEntry: null,
        maxDeleted: undefined,
      };
    }
    const fields = flatToMap(info[1] ?? []);
    const first = fields.get('first-entry');
    const added = fields.get('entries-added');
    const maxDeleted = fields.get('max-deleted-entry-id');
    return {
      ...base,
      exists: true,
      entries: read[1]?.[0]?.[1] ?? [],
      added: typeof added === 'number' ? added : undefined,
      length: Number(fields.get('length') ?? 0),
      firstEntry: Array.isArray(first) && typeof first[0] === 'string' ? first[0] : null,
      maxDeleted: typeof maxDeleted === 'string' && maxDeleted !== '0-0' ? maxDeleted : undefined,
    };
  }

  /** Publishes `entries` in messages of at most batchEntries / batchBytes, in order. */
  private async archive(
    jobId: string,
    start: Position,
    entries: ArchivedEntry[],
    trim: TrimWindow,
  ): Promise<Position> {
    const maxEntries = this.options.batchEntries ?? 500;
    const maxBytes = this.options.batchBytes ?? 256 * 1024;
    // The server refuses a message past max_payload: such an entry is recorded as lost, never retried forever.
    const { nc } = await this.jetstream();
    const payloadLimit = (nc.info?.max_payload ?? 1024 * 1024) - 4096;
    let pos = start;
    let i = 0;
    while (i < entries.length) {
      const parts: string[] = [];
      let bytes = 16;
      const first = (entries[i] as ArchivedEntry)[0];
      let last = first;
      while (i < entries.length && parts.length < maxEntries) {
        const entry = entries[i] as ArchivedEntry;
        const json = JSON.stringify(entry);
        const size = Buffer.byteLength(json);
        if (parts.length > 0 && bytes + size + 1 > maxBytes) break;
        if (size > payloadLimit) break;
        parts.push(json);
        bytes += size + 1;
        last = entry[0];
        i++;
      }
      if (parts.length === 0) {
        const entry = entries[i++] as ArchivedEntry;
        pos = await this.publishGap(
          jobId,
          pos,
          {
            after: pos.cursor,
            before: null,
            lost: 1,
            reason: `entry ${entry[0]} exceeds the NATS max_payload`,
          },
          pos.entries + 1,
          entry[0],
        );
        continue;
      }
      pos = await this.publish(jobId, pos, `{"entries":[${parts.join(',')}]}`, {
        msgId: this.msgId(jobId, pos, first),
        lastEntry: last,
        entries: pos.entries + parts.length,
      });
      trim.add(first, parts.length);
      this.stats.entries += parts.length;
      this.options.metrics?.add(parts.length, { what: 'entries' });
    }
    return pos;
  }

  private async publishGap(
    jobId: string,
    pos: Position,
    gap: ArchiveGap,
    entries = pos.entries,
    lastEntry = pos.cursor,
  ): Promise<Position> {
    this.options.logger.error(
      { jobId, ...gap },
      'log archive: entries lost before they were archived; recorded a gap marker',
    );
    const next = await this.publish(jobId, pos, JSON.stringify({ entries: [], gap }), {
      msgId: this.msgId(jobId, pos, `gap:${lastEntry}:${entries}`),
      lastEntry,
      entries,
      extra: [[ArchiveHeaders.gap, gap.lost === null ? 'unknown' : String(gap.lost)]],
    });
    this.stats.gaps++;
    this.options.metrics?.add(1, { what: 'gaps' });
    return next;
  }

  private async publishComplete(jobId: string, pos: Position): Promise<void> {
    await this.publish(jobId, pos, '{"entries":[],"complete":true}', {
      msgId: this.msgId(jobId, pos, 'complete'),
      lastEntry: pos.cursor,
      entries: pos.entries,
      extra: [[ArchiveHeaders.complete, '1']],
    });
    this.stats.completed++;
    this.options.metrics?.add(1, { what: 'jobs' });
  }

  /**
   * One message, accepted only if the subject still ends where this replica thinks it does. A
   * duplicate acknowledgement means the same id was stored before (by us, before a lost ack, or by
   * another replica with other batch limits): either way, resume from the subject.
   */
  private async publish(
    jobId: string,
    pos: Position,
    body: string,
    meta: { msgId: string; lastEntry: string; entries: number; extra?: [string, string][] },
  ): Promise<Position> {
    const h = headers();
    h.set(ArchiveHeaders.jobId, jobId);
    h.set(ArchiveHeaders.lastEntry, meta.lastEntry);
    h.set(ArchiveHeaders.entries, String(meta.entries));
    if (pos.deletedSeen !== '0-0') h.set(ArchiveHeaders.deletedSeen, pos.deletedSeen);
    if (pos.incarnation) h.set(ArchiveHeaders.incarnation, pos.incarnation);
    for (const [k, v] of meta.extra ?? []) h.set(k, v);
    let ack: Awaited<ReturnType<JetStreamClient['publish']>>;
    try {
      const { js } = await this.jetstream();
      ack = await js.publish(this.names.subject(jobId), this.encoder.encode(body), {
        msgID: meta.msgId,
        headers: h,
        expect: { lastSubjectSequence: pos.seq },
      });
    } catch (err) {
      if (apiErrorCode(err) === WRONG_LAST_SEQUENCE) throw new ArchiveConflict('wrong last subject sequence');
      throw err;
    }
    if (ack.duplicate) throw new ArchiveConflict(`duplicate message id ${meta.msgId}`);
    this.stats.messages++;
    return { ...pos, cursor: meta.lastEntry, entries: meta.entries, seq: ack.seq };
  }

  /** A message id unique to the job's incarnation: a reused id must not hit the duplicate window. */
  private msgId(jobId: string, pos: Position, what: string): string {
    return `${this.options.keys.namespace}:${jobId}:${pos.incarnation}:${what}`;
  }

  /**
   * Where the job's subject stands, from its last message. A subject left by an earlier job of the
   * same id (reaped, the id submitted again) is purged first: its messages would otherwise count
   * as this job's archive, complete marker and all.
   */
  private async position(jobId: string, incarnation: string): Promise<Position> {
    const { jsm } = await this.jetstream();
    const subject = this.names.subject(jobId);
    const empty: Position = {
      cursor: '0-0',
      entries: 0,
      seq: 0,
      complete: false,
      deletedSeen: '0-0',
      incarnation,
    };
    try {
      const last = await jsm.streams.getMessage(this.names.stream, { last_by_subj: subject });
      const archived = last.header.get(ArchiveHeaders.incarnation);
      if (incarnation && archived && archived !== incarnation) {
        this.options.logger.warn(
          { jobId, archived, incarnation },
          "log archive: the job id was used before; the earlier job's archived log is replaced",
        );
        await jsm.streams.purge(this.names.stream, { filter: subject });
        return empty;
      }
      return {
        incarnation,
        cursor: last.header.get(ArchiveHeaders.lastEntry) || '0-0',
        entries: Number(last.header.get(ArchiveHeaders.entries) || 0),
        seq: last.seq,
        complete: last.header.get(ArchiveHeaders.complete) === '1',
        deletedSeen: last.header.get(ArchiveHeaders.deletedSeen) || '0-0',
      };
    } catch (err) {
      if (apiErrorCode(err) === NO_MESSAGE_FOUND) return empty;
      throw err;
    }
  }

  /**
   * JetStream on the current connection (waiting while there is none). Asked for on each use:
   * a connection closed for good is replaced by nats-link.ts, and a handle on the old one would
   * fail every publish from then on.
   */
  private async jetstream(): Promise<{ nc: NatsConnection; js: JetStreamClient; jsm: JetStreamManager }> {
    const nc = await this.options.nats.connection(this.signal);
    if (this.jet?.nc !== nc) this.jet = { nc, js: nc.jetstream(), jsm: await nc.jetstreamManager() };
    return this.jet;
  }

  /** The log is complete: the reaper may delete the job's keys after retention; nobody archives it again. */
  private async forget(jobId: string): Promise<void> {
    const { redis, keys, consumer } = this.options;
    await redis.set(keys.jobLogArchive(jobId), 'done', 'EX', MARKER_TTL_SECONDS);
    await redis.zrem(keys.logArchiveActive, jobId);
    await LOG_ARCHIVE_LEASE_RELEASE.run(redis, [this.leaseKey(jobId)], [consumer]);
  }
}

/**
 * The archived batches still inside the "keep" window: trimming to the first of them leaves at
 * least `keep` archived entries (and everything not archived) in Redis.
 */
class TrimWindow {
  private readonly batches: { first: string; count: number }[] = [];
  private total = 0;
  private trimmedTo: string | undefined;

  constructor(private readonly keep: number) {}

  add(first: string, count: number): void {
    this.batches.push({ first, count });
    this.total += count;
    while (
      this.batches.length > 0 &&
      this.total - (this.batches[0] as { count: number }).count >= this.keep
    ) {
      this.total -= (this.batches.shift() as { count: number }).count;
    }
  }

  /** The MINID to trim to now, or undefined when nothing new may go. */
  minId(cursor: string): string | undefined {
    const id =
      this.keep === 0 ? nextEntryId(cursor) : this.total >= this.keep ? this.batches[0]?.first : undefined;
    if (id === undefined || id === this.trimmedTo) return undefined;
    this.trimmedTo = id;
    return id;
  }
}

function isTerminalState(state: string): boolean {
  const parsed = JobStateSchema.safeParse(state);
  return parsed.success && isTerminal(parsed.data);
}

function apiErrorCode(err: unknown): number | undefined {
  return err instanceof NatsError ? err.api_error?.err_code : undefined;
}

/** XINFO's flat [name, value, name, value…] reply as a map. */
function flatToMap(flat: unknown[]): Map<string, unknown> {
  const map = new Map<string, unknown>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(String(flat[i]), flat[i + 1]);
  return map;
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}
