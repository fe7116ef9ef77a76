import { type LogArchiveNames, logArchiveNames } from '@sandstream/bus';
import { sleep } from '@sandstream/service-kit';
import { ArchiveDiscovery } from './archive-discovery.js';
import { ArchiveJetStream } from './archive-jetstream.js';
import { JobArchive } from './archive-job.js';
import { ArchiveLeases } from './archive-leases.js';
import { ArchivePublisher } from './archive-publisher.js';
import type { ArchiveStats, LogArchiverOptions } from './log-archiver-options.js';

export type { ArchiveStats, LogArchiverOptions } from './log-archiver-options.js';

/**
 * Archives every job's events stream (`sandbox:{jobId}:events`) into one JetStream subject per
 * job, in order and exactly once, and trims from Redis only what JetStream acknowledged, so the
 * Redis stream stays bounded while nothing is lost (docs/log-archive.md). This class runs the
 * parts, each in its own file:
 *
 * - Discovery (archive-discovery.ts): a consumer group on `events:lifecycle` adds each job to
 *   `<ns>:logs:active` and marks it `pending` (the reaper keeps a pending job's keys).
 * - Sharing (archive-leases.ts, here): a job is archived by whichever replica holds its lease;
 *   leases are renewed every tick and a dead replica's jobs move after `leaseMs`.
 * - Exactly once (archive-publisher.ts, archive-position.ts): every message carries the last
 *   entry id it accounts for; a new owner resumes from the subject's last message, and publishes
 *   with `expect.lastSubjectSequence`, so a second writer on the same job (an expired lease, a
 *   retried publish) fails instead of duplicating, and resumes from what JetStream holds.
 * - Loss is recorded, never silent (job-stream-poll.ts): entries trimmed or deleted before they
 *   were archived become a gap marker message (and an error log).
 * - End (archive-job.ts): once the job's record is terminal and its stream drained, a final
 *   `complete` message, the marker becomes `done`, and the job is forgotten.
 */
export class LogArchiver {
  private readonly controller = new AbortController();
  private readonly names: LogArchiveNames;
  private readonly jobs = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private readonly jetstream: ArchiveJetStream;
  private readonly leases: ArchiveLeases;
  private readonly discovery: ArchiveDiscovery;
  private readonly job: JobArchive;
  private run: Promise<void> | undefined;
  /** What this replica did, for tests and /info. */
  readonly stats: ArchiveStats = { entries: 0, messages: 0, gaps: 0, completed: 0, conflicts: 0 };

  constructor(private readonly options: LogArchiverOptions) {
    const { redis, keys, logger, consumer } = options;
    const signal = this.controller.signal;
    this.names = logArchiveNames({
      prefix: options.subjectPrefix ?? 'sandstream',
      namespace: keys.namespace,
    });
    this.jetstream = new ArchiveJetStream({ ...options, names: this.names, signal });
    this.leases = new ArchiveLeases({ redis, keys, consumer, leaseMs: options.leaseMs ?? 15_000 });
    this.discovery = new ArchiveDiscovery({ ...options, signal });
    const publisher = new ArchivePublisher({
      ...options,
      jetstream: this.jetstream,
      names: this.names,
      namespace: keys.namespace,
      stats: this.stats,
    });
    this.job = new JobArchive({
      ...options,
      publisher,
      jetstream: this.jetstream,
      names: this.names,
      leases: this.leases,
      stats: this.stats,
      logger,
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

  private async main(): Promise<void> {
    // Discovery needs only Redis: while NATS is down (even at start-up) new jobs are still marked
    // pending, so the reaper keeps their keys until the archive has them.
    const discovery = this.discovery.run();
    const { logger } = this.options;
    for (let failures = 0; !this.signal.aborted; failures++) {
      try {
        await this.jetstream.ensureStream();
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
    await Promise.all(
      [...this.jobs].map(async ([jobId, job]) => {
        if (await this.leases.renew(jobId)) return;
        // Another replica holds it now (our lease lapsed): it goes on from what JetStream holds.
        this.options.logger.warn({ jobId }, 'log archive: lease lost; another replica takes the job');
        job.controller.abort();
      }),
    );
  }

  private async claimJobs(): Promise<void> {
    const { redis } = this.options;
    const free = (this.options.maxJobs ?? 2000) - this.jobs.size;
    if (free <= 0) return;
    const ids = await redis.zrange(this.options.keys.logArchiveActive, 0, 9999);
    const candidates = shuffle(ids.filter((id) => !this.jobs.has(id)));
    // At most half of what is waiting per tick: replicas ticking at the same time split the work.
    const take = candidates.slice(0, Math.min(free, Math.max(4, Math.ceil(candidates.length / 2))));
    await Promise.all(
      take.map(async (jobId) => {
        if ((await this.leases.take(jobId)) && !this.signal.aborted) this.startJob(jobId);
      }),
    );
  }

  private startJob(jobId: string): void {
    const controller = new AbortController();
    const signal = AbortSignal.any([this.signal, controller.signal]);
    const done = this.job.run(jobId, signal).finally(() => {
      if (this.jobs.get(jobId)?.controller === controller) this.jobs.delete(jobId);
    });
    this.jobs.set(jobId, { controller, done });
  }
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}
