import type { CodeResult, StepResult } from '@sandstream/wire';

export type OutputStream = 'stdout' | 'stderr';

/**
 * What a step executor gets from the agent loop. Executors know nothing about Redis: they
 * report output lines and return an outcome; the loop turns those into events and a result.
 */
export interface StepContext {
  /** One call per output line (without the newline). Must not block: the loop buffers or drops. */
  onLine(stream: OutputStream, line: string): void;
  /**
   * Optional, for executors with a lot of output: false while every further line would be
   * dropped (the loop's buffer is full). Such an executor may then report lines through
   * onDroppedLine instead of decoding them for onLine; the loop counts them the same way.
   */
  acceptingLines?(): boolean;
  onDroppedLine?(stream: OutputStream): void;
  /**
   * Optional, for code cells: a result (display(), a plot, the main result) as it is produced,
   * `index` its place in the cell's results. Sent to followers at once, best effort (a result
   * that does not fit the loop's buffer is left for the step's result); must not block.
   */
  onResult?(index: number, result: CodeResult): void;
  /**
   * Optional back-pressure (the log archive on): when acceptingLines() is false, true means the
   * line must wait rather than be dropped. The executor stops reading its output and asks
   * whenAccepting to be called back once lines may flow again.
   */
  holdingLines?(): boolean;
  whenAccepting?(callback: () => void): void;
  /** Aborted when the step is cancelled (control message) or the agent is shutting down. */
  signal: AbortSignal;
  /** The agent's working directory; a step's relative workingDirectory resolves against it. */
  baseDirectory: string;
  /** File steps stay inside baseDirectory (resolve-path.ts); off unless the agent was told so. */
  confineFiles?: boolean | undefined;
  /** Confined only: directories outside baseDirectory a link may lead to (the in-process volumes). */
  confineAllow?: readonly string[] | undefined;
}

/** A StepResult without the fields the loop fills in itself. */
export type StepOutcome = Omit<StepResult, 'schemaVersion' | 'stepId' | 'durationSeconds'>;
