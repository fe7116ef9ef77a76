import { type ArchivedEntry, type ArchiveGap, ArchiveHeaders, type LogArchiveNames } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import { headers, type JetStreamClient } from 'nats';
import { type ArchiveJetStream, apiErrorCode, WRONG_LAST_SEQUENCE } from './archive-jetstream.js';
import type { Position } from './archive-position.js';
import type { ArchiveMetrics, ArchiveStats } from './log-archiver-options.js';
import type { TrimWindow } from './trim-window.js';

/** Someone else's message reached the subject first (a competing replica, or our own retried one). */
export class ArchiveConflict extends Error {}

export interface ArchivePublisherOptions {
  jetstream: ArchiveJetStream;
  names: LogArchiveNames;
  /** The Redis namespace: part of every message id. */
  namespace: string;
  logger: Logger;
  stats: ArchiveStats;
  metrics?: ArchiveMetrics;
  /** Limits of one JetStream message. */
  batchEntries?: number;
  batchBytes?: number;
}

/**
 * Writes a job's subject: batches of entries, gap markers, the complete marker. Every message
 * says which entry it accounts up to and is accepted only where the subject still ends where this
 * replica thinks it does (exactly once across replicas).
 */
export class ArchivePublisher {
  private readonly encoder = new TextEncoder();

  constructor(private readonly options: ArchivePublisherOptions) {}

  /** Publishes `entries` in messages of at most batchEntries / batchBytes, in order. */
  async archive(
    jobId: string,
    start: Position,
    entries: ArchivedEntry[],
    trim: TrimWindow,
  ): Promise<Position> {
    const maxEntries = this.options.batchEntries ?? 500;
    const maxBytes = this.options.batchBytes ?? 256 * 1024;
    // The server refuses a message past max_payload: such an entry is recorded as lost, never retried forever.
    const { nc } = await this.options.jetstream.handles();
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
      this.options.stats.entries += parts.length;
      this.options.metrics?.add(parts.length, { what: 'entries' });
    }
    return pos;
  }

  async publishGap(
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
    this.options.stats.gaps++;
    this.options.metrics?.add(1, { what: 'gaps' });
    return next;
  }

  async publishComplete(jobId: string, pos: Position): Promise<void> {
    await this.publish(jobId, pos, '{"entries":[],"complete":true}', {
      msgId: this.msgId(jobId, pos, 'complete'),
      lastEntry: pos.cursor,
      entries: pos.entries,
      extra: [[ArchiveHeaders.complete, '1']],
    });
    this.options.stats.completed++;
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
      const { js } = await this.options.jetstream.handles();
      ack = await js.publish(this.options.names.subject(jobId), this.encoder.encode(body), {
        msgID: meta.msgId,
        headers: h,
        expect: { lastSubjectSequence: pos.seq },
      });
    } catch (err) {
      if (apiErrorCode(err) === WRONG_LAST_SEQUENCE) throw new ArchiveConflict('wrong last subject sequence');
      throw err;
    }
    if (ack.duplicate) throw new ArchiveConflict(`duplicate message id ${meta.msgId}`);
    this.options.stats.messages++;
    return { ...pos, cursor: meta.lastEntry, entries: meta.entries, seq: ack.seq };
  }

  /** A message id unique to the job's incarnation: a reused id must not hit the duplicate window. */
  private msgId(jobId: string, pos: Position, what: string): string {
    return `${this.options.namespace}:${jobId}:${pos.incarnation}:${what}`;
  }
}
