import type { StepResult } from '@sandstream/wire';
import { type OutputGap, SeqGaps } from './seq-gaps.js';

export type { OutputGap } from './seq-gaps.js';

/** Default cap of the stdout and of the stderr an ExecResult keeps (the stream has it all). */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

export interface ExecResult {
  commandId: string;
  /** The exit code; 128 + the signal when it was killed (timed out, cancelled); null when it never started. */
  exitCode: number | null;
  durationMs: number;
  timedOut: boolean;
  cancelled: boolean;
  /** The output lines, each ending in a newline (output travels line by line). */
  stdout: string;
  stderr: string;
  /** Some output is not in stdout/stderr: past the cap, or in a gap. */
  truncated: boolean;
  gaps: OutputGap[];
  /** Set when the agent could not run it (spawn failure, invalid command …). */
  errorMessage: string | null;
  errorCode: StepResult['errorCode'];
  /**
   * Set when following stopped before the command ended (`stopFollowing` aborted): it is still
   * running, `exitCode` is null and stdout/stderr hold what was seen until then.
   */
  stillRunning?: true;
}

export interface CommandOutputLine {
  stream: 'stdout' | 'stderr';
  line: string;
  seq: number;
}

/** An item of a command's output as its async iterator yields it (and as the API's event stream names it). */
export type ExecItem = CommandOutputLine | { stream: 'gap'; from: number; to: number };

/**
 * The one place a command's output event becomes a line (or gap): an agent's event read from
 * the sandbox's events stream (`kind`, `line`, `seq`) or an event of the API's stream (its
 * name, its JSON data), which is an ExecItem written as it is. Anything else is not output.
 */
export function execItemOf(
  kind: string,
  data: { line?: unknown; seq?: unknown; from?: unknown; to?: unknown },
): ExecItem | undefined {
  if (kind === 'stdout' || kind === 'stderr') {
    return { stream: kind, line: typeof data.line === 'string' ? data.line : '', seq: Number(data.seq) };
  }
  if (kind === 'gap') return { stream: 'gap', from: Number(data.from), to: Number(data.to) };
  return undefined;
}

/**
 * Collects one command's output lines as they come: capped per stream, with every seq gap
 * recorded where it happens (a line's seq is one more than the previous line's, whichever stream).
 */
export class CommandOutput {
  private readonly text = { stdout: [] as string[], stderr: [] as string[] };
  private readonly bytes = { stdout: 0, stderr: 0 };
  private readonly seqs = new SeqGaps();
  private capped = false;
  readonly gaps: OutputGap[] = [];

  constructor(private readonly maxBytes: number = DEFAULT_MAX_OUTPUT_BYTES) {}

  /** Returns the gap this line reveals, if any. */
  add(line: CommandOutputLine): OutputGap | undefined {
    const gap = this.seqs.see(line.seq);
    if (gap) this.gaps.push(gap);
    const size = Buffer.byteLength(line.line, 'utf8') + 1;
    if (this.bytes[line.stream] + size > this.maxBytes) {
      this.capped = true;
      return gap;
    }
    this.bytes[line.stream] += size;
    this.text[line.stream].push(line.line);
    return gap;
  }

  /** The completed event's seq closes the count: lines after the last one seen are a gap too. */
  complete(completedSeq: number | undefined): void {
    const gap = completedSeq === undefined ? undefined : this.seqs.see(completedSeq);
    if (gap) this.gaps.push(gap);
  }

  /** What was seen of a command still running when its follower stopped following. */
  seenSoFar(commandId: string, durationMs: number): ExecResult {
    const joined = (lines: string[]) => (lines.length > 0 ? `${lines.join('\n')}\n` : '');
    return {
      commandId,
      exitCode: null,
      durationMs,
      timedOut: false,
      cancelled: false,
      stdout: joined(this.text.stdout),
      stderr: joined(this.text.stderr),
      truncated: this.capped || this.gaps.length > 0,
      gaps: this.gaps,
      errorMessage: null,
      errorCode: undefined,
      stillRunning: true,
    };
  }

  result(commandId: string, r: StepResult): ExecResult {
    const joined = (lines: string[]) => (lines.length > 0 ? `${lines.join('\n')}\n` : '');
    return {
      commandId,
      exitCode: r.exitCode,
      durationMs: Math.round(r.durationSeconds * 1000),
      timedOut: r.timedOut,
      cancelled: r.cancelled === true,
      stdout: joined(this.text.stdout),
      stderr: joined(this.text.stderr),
      truncated: this.capped || this.gaps.length > 0 || (r.droppedLines ?? 0) > 0,
      gaps: this.gaps,
      errorMessage: r.errorMessage,
      errorCode: r.errorCode,
    };
  }
}
