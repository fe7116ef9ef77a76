import { type CreateProgress, decodeJobEventFields, type JobState, TERMINAL_STATES } from '@sandstream/bus';
import { decodeEventEntry, type StepEvent } from '@sandstream/wire';
import { followCursor } from './follow-cursor.js';

/**
 * One item of a job's timeline as `follow()` yields it. `cursor` names the item's place in the
 * events stream (follow-cursor.ts): pass it back as `from` to resume right after this item.
 *
 * A `gap` stands where lines of a step are missing (trimmed from the capped stream, or dropped by
 * the agent): lines `from`..`to` by their seq, `to - from + 1` of them. `startTrimmed` says the
 * step's started event was trimmed too (its gap starts at line 1, and is empty when only the
 * started event went). Its cursor is the entry before the one that revealed it.
 */
export type FollowItem =
  | { type: 'state'; cursor: string; from: JobState | null; to: JobState; reason?: string; terminal: boolean }
  | { type: 'cancel-requested'; cursor: string; reason?: string }
  /** A long create phase advancing (an image pull), while the sandbox starts; `message` in words. */
  | { type: 'progress'; cursor: string; progress: CreateProgress; message: string }
  | { type: 'step-started'; cursor: string; stepId: string }
  | { type: 'output'; cursor: string; stepId: string; stream: 'stdout' | 'stderr'; line: string; seq: number }
  | { type: 'gap'; cursor: string; stepId: string; from: number; to: number; startTrimmed?: boolean }
  | {
      type: 'step-completed';
      cursor: string;
      stepId: string;
      exitCode: number | null;
      droppedLines: number;
      /** One past the step's last line: the number of lines it printed is seq - 1. */
      seq: number;
    };

/**
 * Turns one entry of `sandbox:{jobId}:events` (agent `event` field(s) or job-store `job` field)
 * into its FollowItems: one, or several where the agent packed lines into one entry (its output
 * faster than its share of the sandbox's Redis rate, or a quick step's events together,
 * decodeEventEntry). The last item of an entry has the entry's id as its cursor; the ones before
 * it `id:index`, so resuming from any of them goes on with the item after it (follow-cursor.ts).
 */
export function decodeFollowEntries(id: string, fields: readonly string[]): FollowItem[] {
  const job = decodeJobEventFields(fields);
  if (job) {
    if (job.type === 'progress') {
      return job.progress
        ? [{ type: 'progress', cursor: id, progress: job.progress, message: job.reason ?? '' }]
        : [];
    }
    if (job.type === 'cancel-requested') {
      return [{ type: 'cancel-requested', cursor: id, ...(job.reason ? { reason: job.reason } : {}) }];
    }
    return [
      {
        type: 'state',
        cursor: id,
        from: job.from,
        to: job.to,
        terminal: TERMINAL_STATES.includes(job.to),
        ...(job.reason ? { reason: job.reason } : {}),
      },
    ];
  }
  // A code cell's results are not part of a timeline (runCode's onResult takes them): left out
  // before the cursors are counted, so resuming inside a packed entry skips what it should.
  const events = decodeEventEntry(fields).filter((event) => event.kind !== 'result');
  if (events.length === 1) return [followItemOf(id, events[0] as StepEvent)];
  return events.map((event, i) => followItemOf(followCursor(id, i, events.length), event));
}

/** The first item of an entry (decodeFollowEntries), or null for an entry this reader does not understand. */
export function decodeFollowEntry(id: string, fields: readonly string[]): FollowItem | null {
  return decodeFollowEntries(id, fields)[0] ?? null;
}

function followItemOf(cursor: string, event: StepEvent): FollowItem {
  switch (event.kind) {
    case 'started':
      return { type: 'step-started', cursor, stepId: event.stepId };
    case 'completed':
      return {
        type: 'step-completed',
        cursor,
        stepId: event.stepId,
        exitCode: event.exitCode ?? null,
        droppedLines: event.droppedLines ?? 0,
        seq: event.seq,
      };
    default:
      return {
        type: 'output',
        cursor,
        stepId: event.stepId,
        stream: event.kind === 'stderr' ? 'stderr' : 'stdout',
        line: event.line ?? '',
        seq: event.seq,
      };
  }
}
