import { JobField, type KeySpace, type LogArchiveNames, type RedisClient } from '@sandstream/bus';
import { sleep } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';
import { MARKER_TTL_SECONDS } from './archive-discovery.js';
import type { ArchiveJetStream } from './archive-jetstream.js';
import type { ArchiveLeases } from './archive-leases.js';
import { readPosition } from './archive-position.js';
import { ArchiveConflict, type ArchivePublisher } from './archive-publisher.js';
import { isTerminalState, lossSince, type Poll, pollJobStream } from './job-stream-poll.js';
import type { LogArchiverOptions } from './log-archiver-options.js';
import { TrimWindow } from './trim-window.js';

/** An idle job's polls back off to this; new entries bring the pace back to idlePollMs. */
const MAX_IDLE_POLL_MS = 2_000;

export type JobArchiveOptions = Pick<
  LogArchiverOptions,
  'readCount' | 'keepEntries' | 'idlePollMs' | 'completeGraceMs'
> & {
  redis: RedisClient;
  keys: KeySpace;
  logger: Logger;
  publisher: ArchivePublisher;
  jetstream: ArchiveJetStream;
  names: LogArchiveNames;
  leases: ArchiveLeases;
  stats: { conflicts: number };
};

/**
 * One job's archive, while this replica holds its lease: resume from the subject's last message,
 * follow the events stream, publish and trim, record losses as gaps, and at the end (the record
 * terminal and the stream drained) a final `complete` message; the marker becomes `done`.
 */
export class JobArchive {
  constructor(private readonly options: JobArchiveOptions) {}

  async run(jobId: string, signal: AbortSignal): Promise<void> {
    const { logger, leases } = this.options;
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
          this.options.stats.conflicts++;
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
    await leases.release(jobId).catch(() => undefined);
  }

  /** Archives the job from where its subject stands; true once its log is complete. */
  private async follow(jobId: string, signal: AbortSignal): Promise<boolean> {
    const { redis, keys, publisher } = this.options;
    const events = keys.sandbox(jobId).events;
    const readCount = this.options.readCount ?? 1000;
    const trim = new TrimWindow(this.options.keepEntries ?? 2000);
    const incarnation = (await redis.hget(keys.job(jobId), JobField.createdAt)) ?? '';
    let pos = await readPosition(this.options, jobId, incarnation);
    if (pos.complete) return true;
    let seenAdded: number | undefined;
    const idlePollMs = this.options.idlePollMs ?? 150;
    let idleMs = idlePollMs;
    while (!signal.aborted) {
      const poll = await pollJobStream(redis, keys, jobId, pos.cursor, readCount);
      if (!poll.exists) {
        const live = poll.state !== null && !isTerminalState(poll.state);
        if (live) {
          await sleep(this.options.idlePollMs ?? 150, signal);
          continue;
        }
        // Gone with the job: whatever was not archived yet is lost (unless it was all read).
        if (seenAdded === undefined || pos.entries < seenAdded) {
          pos = await publisher.publishGap(jobId, pos, {
            after: pos.cursor,
            before: null,
            lost: seenAdded === undefined ? null : seenAdded - pos.entries,
            reason: 'the events stream was deleted before it was archived',
          });
        }
        await publisher.publishComplete(jobId, pos);
        return true;
      }
      seenAdded = poll.added;
      const gap = lossSince(pos, poll);
      if (gap) {
        pos = await publisher.publishGap(
          jobId,
          { ...pos, deletedSeen: gap.deletedSeen ?? pos.deletedSeen },
          gap.gap,
          gap.entries,
        );
      }
      if (poll.entries.length > 0) {
        pos = await publisher.archive(jobId, pos, poll.entries, trim);
        const minId = trim.minId(pos.cursor);
        if (minId) await redis.xtrim(events, 'MINID', '~', minId);
        if (poll.entries.length >= readCount) continue; // busy: read on at once
      } else if (this.finished(poll)) {
        // Drained in the same atomic look that saw the record terminal: the terminal lifecycle
        // entry is at or before the cursor, archived.
        await publisher.publishComplete(jobId, pos);
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

  /** The log is complete: the reaper may delete the job's keys after retention; nobody archives it again. */
  private async forget(jobId: string): Promise<void> {
    const { redis, keys } = this.options;
    await redis.set(keys.jobLogArchive(jobId), 'done', 'EX', MARKER_TTL_SECONDS);
    await redis.zrem(keys.logArchiveActive, jobId);
    await this.options.leases.release(jobId);
  }
}
