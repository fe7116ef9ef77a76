import { ArchiveHeaders, type LogArchiveNames } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import { type ArchiveJetStream, apiErrorCode, NO_MESSAGE_FOUND } from './archive-jetstream.js';

/** Where a job's archive stands: what its subject's last message says. */
export interface Position {
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

/**
 * Where the job's subject stands, from its last message. A subject left by an earlier job of the
 * same id (reaped, the id submitted again) is purged first: its messages would otherwise count
 * as this job's archive, complete marker and all.
 */
export async function readPosition(
  options: { jetstream: ArchiveJetStream; names: LogArchiveNames; logger: Logger },
  jobId: string,
  incarnation: string,
): Promise<Position> {
  const { names, logger } = options;
  const { jsm } = await options.jetstream.handles();
  const subject = names.subject(jobId);
  const empty: Position = {
    cursor: '0-0',
    entries: 0,
    seq: 0,
    complete: false,
    deletedSeen: '0-0',
    incarnation,
  };
  try {
    const last = await jsm.streams.getMessage(names.stream, { last_by_subj: subject });
    const archived = last.header.get(ArchiveHeaders.incarnation);
    if (incarnation && archived && archived !== incarnation) {
      logger.warn(
        { jobId, archived, incarnation },
        "log archive: the job id was used before; the earlier job's archived log is replaced",
      );
      await jsm.streams.purge(names.stream, { filter: subject });
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
