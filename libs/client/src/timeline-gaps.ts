import type { FollowItem } from './follow-entry.js';
import { SeqGaps } from './seq-gaps.js';

/**
 * Puts gap items into a job's timeline where its steps' seq numbers jump (seq-gaps.ts), for every
 * reader of a job's log: `follow()`, and the CLI's `logs` from Redis or the log archive.
 *
 * A step first met at a line or at its completion, not at its started event, lost its start to
 * the stream's cap: its gap counts from line 1 and is marked `startTrimmed`. Except when the
 * reader resumed after a cursor: a step already under way there was seen by the caller before,
 * so its first event here is only a new baseline.
 */
export class TimelineGaps {
  private readonly steps = new Map<string, SeqGaps>();
  private readonly resumed: boolean;
  private cursor: string;

  /** `from`: the cursor the reader resumed after, if it did. */
  constructor(options: { from?: string | undefined } = {}) {
    this.cursor = options.from ?? '0-0';
    this.resumed = options.from !== undefined;
  }

  /** The item, preceded by the gap it reveals if any. */
  accept(item: FollowItem): FollowItem[] {
    const before = this.cursor;
    this.cursor = item.cursor;
    if (item.type === 'step-started') {
      this.steps.set(item.stepId, new SeqGaps());
      return [item];
    }
    if (item.type !== 'output' && item.type !== 'step-completed') return [item];
    let seqs = this.steps.get(item.stepId);
    if (!seqs) {
      if (this.resumed) {
        this.steps.set(item.stepId, new SeqGaps(item.seq));
        return [item];
      }
      seqs = new SeqGaps();
      this.steps.set(item.stepId, seqs);
      seqs.see(item.seq);
      return [
        { type: 'gap', cursor: before, stepId: item.stepId, from: 1, to: item.seq - 1, startTrimmed: true },
        item,
      ];
    }
    const gap = seqs.see(item.seq);
    return gap ? [{ type: 'gap', cursor: before, stepId: item.stepId, ...gap }, item] : [item];
  }
}
