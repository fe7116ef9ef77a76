import type { StepResult } from '@sandstream/wire';

export type OutputStream = 'stdout' | 'stderr';

/**
 * What a step executor gets from the agent loop. Executors know nothing about Redis: they
 * report output lines and return an outcome; the loop turns those into events and a result.
 */
export interface StepContext {
  /** One call per output line (without the newline). Must not block: the loop buffers or drops. */
  onLine(stream: OutputStream, line: string): void;
  /** Aborted when the step is cancelled (control message) or the agent is shutting down. */
  signal: AbortSignal;
  /** The agent's working directory; a step's relative workingDirectory resolves against it. */
  baseDirectory: string;
}

/** A StepResult without the fields the loop fills in itself. */
export type StepOutcome = Omit<StepResult, 'schemaVersion' | 'stepId' | 'durationSeconds'>;
