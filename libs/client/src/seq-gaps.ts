/** Lines a follower did not see (trimmed from the capped stream, or dropped by the agent). */
export interface OutputGap {
  /** First missing line seq. */
  from: number;
  /** Last missing line seq. */
  to: number;
}

/**
 * One step's line numbering as a follower sees it. The agent numbers a step's events itself
 * (started = 0, output lines 1..n, completed = n + 1, counting lines it dropped and lines the
 * stream's cap trimmed), so any seq more than one past the last one seen reveals a gap, and the
 * completed event's seq closes the count. The one place a seq gap is worked out, for a live
 * sandbox's commands (CommandOutput) and a job's steps (TimelineGaps) alike.
 */
export class SeqGaps {
  private last: number;

  /** `last`: the seq seen so far (0: the started event, or nothing yet). */
  constructor(last = 0) {
    this.last = last;
  }

  /**
   * An event with this seq arrived (a line, or the completed event): the lines between it and
   * the last one seen are missing. A seq at or below the last one (a duplicate) reveals nothing.
   */
  see(seq: number): OutputGap | undefined {
    const gap = seq > this.last + 1 ? { from: this.last + 1, to: seq - 1 } : undefined;
    this.last = Math.max(this.last, seq);
    return gap;
  }
}

/** Lines in a gap: 0 for a step whose started event alone was trimmed. */
export function gapLines(gap: OutputGap): number {
  return Math.max(0, gap.to - gap.from + 1);
}
