import { SCHEMA_VERSION } from './schema-major.js';
import type { StepErrorCode, StepResult } from './step-result.js';

/** A failed result for a step that could not run at all. */
export function errorResult(
  stepId: string | null,
  errorCode: StepErrorCode,
  errorMessage: string,
  durationSeconds = 0,
): StepResult {
  return {
    schemaVersion: SCHEMA_VERSION,
    stepId,
    exitCode: null,
    timedOut: errorCode === 'timed_out',
    durationSeconds,
    errorMessage,
    errorCode,
  };
}
