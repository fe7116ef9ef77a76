import type { GrepMatch } from '@sandstream/wire';
import type { StepOutcome } from './step-context.js';

/** A grep step after path resolution: what either engine needs to run it. */
export interface GrepQuery {
  /** Absolute directory or file to search. */
  root: string;
  /** When `root` is a file, matches carry this path (the step's own path) instead of a relative one. */
  filePath: string | null;
  pattern: string;
  ignoreCase: boolean;
  fixedStrings: boolean;
  glob: string | undefined;
  maxMatches: number;
  signal: AbortSignal;
}

export type GrepEngineResult = { matches: GrepMatch[]; truncated: boolean } | { failure: StepOutcome };
