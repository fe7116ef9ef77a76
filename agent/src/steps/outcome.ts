import type { StepErrorCode, StepOutput } from '@sandstream/wire';
import type { StepOutcome } from './step-context.js';

/**
 * Builders for the two shapes every non-run executor returns. Non-run steps report exitCode 0
 * on success and null on failure, so a reader can treat every kind alike.
 */
export function succeeded(output: StepOutput): StepOutcome {
  return { exitCode: 0, timedOut: false, errorMessage: null, output };
}

export function failed(errorCode: StepErrorCode, errorMessage: string): StepOutcome {
  return { exitCode: null, timedOut: errorCode === 'timed_out', errorMessage, errorCode };
}
