/**
 * Where a follower resumes. A FollowItem's cursor is the id of the events-stream entry it came
 * from (`ms-seq`) when it is that entry's last item, and `ms-seq:index` (0-based) for an earlier
 * item of an entry the agent packed several events into (a quick step's started, output and
 * completed events in one entry). Resuming from `ms-seq:index` reads that entry again and skips
 * its items up to and including `index`: nothing is replayed, nothing skipped.
 */
export const FOLLOW_CURSOR_PATTERN = /^\d+-\d+(?::\d+)?$/;

/** What a follower resuming after `cursor` reads: stream entries after `after`, dropping the first `skip` items of entry `entry`. */
export interface ResumePoint {
  /** XREAD from here (exclusive). */
  after: string;
  /** The entry read again for its later items, and how many of its items were seen already. */
  partial?: { entry: string; skip: number };
}

export function followCursor(entryId: string, index: number, items: number): string {
  return index === items - 1 ? entryId : `${entryId}:${index}`;
}

export function resumePoint(cursor: string): ResumePoint {
  const colon = cursor.indexOf(':');
  if (colon < 0) return { after: cursor };
  const entry = cursor.slice(0, colon);
  return { after: idBefore(entry), partial: { entry, skip: Number(cursor.slice(colon + 1)) + 1 } };
}

const MAX_ID_SEQ = '18446744073709551615';

/** The greatest stream id below `id` (`ms-seq`): XREAD from it returns `id` again. */
export function idBefore(id: string): string {
  const [ms = '0', seq = '0'] = id.split('-');
  if (seq !== '0') return `${ms}-${BigInt(seq) - 1n}`;
  return ms === '0' ? '0-0' : `${BigInt(ms) - 1n}-${MAX_ID_SEQ}`;
}
