import {
  type ArchivedEntry,
  type ArchiveGap,
  compareEntryIds,
  isTerminal,
  JobField,
  JobStateSchema,
  type KeySpace,
  type RedisClient,
} from '@sandstream/bus';
import type { Position } from './archive-position.js';

/** One atomic look at a job: its stream's bookkeeping, the entries after the cursor, the record. */
export interface Poll {
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

export type StreamReply = [string, ArchivedEntry[]][] | null;
type ExecReply = [Error | null, unknown][] | null;

/** XINFO + XREAD + the record, in one MULTI (one slot): a consistent view of the job. */
export async function pollJobStream(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
  cursor: string,
  count: number,
): Promise<Poll> {
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

/**
 * Entries that left the stream before they were archived. Trimming only ever removes a prefix,
 * so the stream holds the last `length` of the `added` entries: more than `pos.entries`
 * removed means the difference was never archived. (Redis 7's max-deleted-entry-id counts only
 * XDEL, not trimming, so it serves for deletions in the middle.)
 */
export function lossSince(
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

export function isTerminalState(state: string): boolean {
  const parsed = JobStateSchema.safeParse(state);
  return parsed.success && isTerminal(parsed.data);
}

/** XINFO's flat [name, value, name, value…] reply as a map. */
function flatToMap(flat: unknown[]): Map<string, unknown> {
  const map = new Map<string, unknown>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(String(flat[i]), flat[i + 1]);
  return map;
}
