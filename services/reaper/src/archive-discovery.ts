import { type ArchivedEntry, decodeJobEventFields, type KeySpace, type RedisClient } from '@sandstream/bus';
import { sleep } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';
import type { StreamReply } from './job-stream-poll.js';

const DISCOVERY_GROUP = 'log-archive';
/**
 * How often discovery also takes every starting or running job from the state index: a job whose
 * lifecycle entries the capped stream dropped before discovery read them (the archiver down
 * long enough) would otherwise never be archived, and its agent would wait at its high water mark.
 */
const SWEEP_MS = 30_000;
/** The per-job marker outlives any sensible retention; the reaper deletes it with the job's keys. */
export const MARKER_TTL_SECONDS = 30 * 86_400;

export interface ArchiveDiscoveryOptions {
  /** Per-job commands (never blocking). */
  redis: RedisClient;
  /** A dedicated connection: the XREADGROUP BLOCK on `events:lifecycle` holds it. */
  lifecycleRedis: RedisClient;
  keys: KeySpace;
  logger: Logger;
  /** This replica's consumer name in the discovery group. */
  consumer: string;
  /** Lifecycle entries another replica read but never acknowledged are taken over after this long. */
  claimIdleMs?: number;
  signal: AbortSignal;
}

/**
 * Discovery: a consumer group on `events:lifecycle` adds each job to `<ns>:logs:active` and marks
 * it `pending` (the reaper keeps a pending job's keys until its log is archived). Needs only
 * Redis, so it goes on while NATS is down.
 */
export class ArchiveDiscovery {
  constructor(private readonly options: ArchiveDiscoveryOptions) {}

  async run(): Promise<void> {
    const { logger, signal } = this.options;
    while (!signal.aborted) {
      try {
        await this.ensureGroup();
        await this.discover('0');
        let swept = 0;
        while (!signal.aborted) {
          if (Date.now() - swept >= SWEEP_MS) {
            await this.sweepLiveJobs();
            swept = Date.now();
          }
          await this.claimStaleDiscovery();
          await this.discover('>');
        }
      } catch (err) {
        if (signal.aborted) break;
        logger.warn({ err: (err as Error).message }, 'log archive discovery error; retrying');
        await sleep(1000, signal);
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
}
