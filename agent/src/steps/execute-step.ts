import type { Step } from '@sandstream/wire';
import { grepStep } from './grep-step.js';
import { listFilesStep } from './list-files-step.js';
import { failed } from './outcome.js';
import { readFileStep } from './read-file-step.js';
import { runStep } from './run-step.js';
import type { StepContext, StepOutcome } from './step-context.js';
import { writeFileStep } from './write-file-step.js';

/**
 * Runs one step of any kind except `shutdown` (which the agent loop handles itself) and
 * returns its outcome. Never throws: an executor bug or an unexpected system error becomes an
 * `internal` error result, so the loop always has something to report.
 */
export async function executeStep(step: Step, ctx: StepContext): Promise<StepOutcome> {
  try {
    return await dispatch(step, ctx);
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    return failed('internal', `${step.kind} step failed unexpectedly: ${detail}`);
  }
}

function dispatch(step: Step, ctx: StepContext): Promise<StepOutcome> {
  switch (step.kind) {
    case 'run':
      return runStep(step, ctx);
    case 'readFile':
      return readFileStep(step, ctx);
    case 'writeFile':
      return writeFileStep(step, ctx);
    case 'listFiles':
      return listFilesStep(step, ctx);
    case 'grep':
      return grepStep(step, ctx);
    case 'shutdown':
      return Promise.resolve(
        failed('invalid_step', 'shutdown steps are handled by the agent loop, not executed'),
      );
    default: {
      // Unreachable for parsed steps; the `never` makes a new kind in the schema a compile error here.
      const unknown: never = step;
      const kind = (unknown as { kind?: unknown }).kind;
      return Promise.resolve(failed('invalid_step', `unknown step kind ${JSON.stringify(kind)}`));
    }
  }
}
