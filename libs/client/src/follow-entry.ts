import { decodeJobEventFields, type JobState, TERMINAL_STATES } from '@sandstream/bus';
import { decodeEventFields } from '@sandstream/wire';

/**
 * One item of a job's timeline as `follow()` yields it. `cursor` is the stream entry id: pass it
 * back as `from` to resume right after this item.
 *
 * A `gap` stands where lines of a step are missing (trimmed from the capped stream, or dropped by
 * the agent): lines `from`..`to` by their seq, `to - from + 1` of them. `startTrimmed` says the
 * step's started event was trimmed too (its gap starts at line 1, and is empty when only the
 * started event went). Its cursor is the entry before the one that revealed it.
 */
export type FollowItem =
  | { type: 'state'; cursor: string; from: JobState | null; to: JobState; reason?: string; terminal: boolean }
  | { type: 'cancel-requested'; cursor: string; reason?: string }
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

/** Turns one entry of `sandbox:{jobId}:events` (agent `event` or job-store `job` field) into a FollowItem. */
export function decodeFollowEntry(id: string, fields: readonly string[]): FollowItem | null {
  const job = decodeJobEventFields(fields);
  if (job) {
    if (job.type === 'cancel-requested') {
      return { type: 'cancel-requested', cursor: id, ...(job.reason ? { reason: job.reason } : {}) };
    }
    return {
      type: 'state',
      cursor: id,
      from: job.from,
      to: job.to,
      terminal: TERMINAL_STATES.includes(job.to),
      ...(job.reason ? { reason: job.reason } : {}),
    };
  }
  const event = decodeEventFields(fields);
  if (!event) return null;
  switch (event.kind) {
    case 'started':
      return { type: 'step-started', cursor: id, stepId: event.stepId };
    case 'completed':
      return {
        type: 'step-completed',
        cursor: id,
        stepId: event.stepId,
        exitCode: event.exitCode ?? null,
        droppedLines: event.droppedLines ?? 0,
        seq: event.seq,
      };
    default:
      return {
        type: 'output',
        cursor: id,
        stepId: event.stepId,
        stream: event.kind,
        line: event.line ?? '',
        seq: event.seq,
      };
  }
}
