import type { Step } from '@sandstream/wire';
import { CodeContexts } from '../code/code-contexts.js';
import type { ProcessLauncher } from '../process/launcher.js';
import { grepStep } from './grep-step.js';
import { listFilesStep } from './list-files-step.js';
import { failed } from './outcome.js';
import { readFileStep } from './read-file-step.js';
import { confinementFailure, resolveStepPath } from './resolve-path.js';
import { runStep } from './run-step.js';
import { inSandboxView } from './sandbox-view.js';
import { ShellSessions } from './shell-sessions.js';
import { statsStep } from './stats-step.js';
import type { StdinChannel } from './stdin-stream.js';
import type { StepContext, StepOutcome } from './step-context.js';
import type { TerminalChannel } from './terminal-channel.js';
import { terminalStep } from './terminal-step.js';
import type { TransferChannel } from './transfer-channel.js';
import { downloadStep, uploadStep } from './transfer-steps.js';
import { watchStep } from './watch-step.js';
import { writeFileStep } from './write-file-step.js';

export type StepExecutor = (step: Step, ctx: StepContext) => Promise<StepOutcome>;

export interface StepExecutorOptions {
  /** Starts run steps' processes; default Node's child_process. */
  launcher?: ProcessLauncher;
  /** Where upload and download steps stream their tar (the agent's Redis); without it they are refused. */
  transfers?: TransferChannel;
  /** Where terminals read input and write output (the agent's Redis); without it they are refused. */
  terminals?: TerminalChannel;
  /** Where open stdins (run steps with stdinStream) read input (the agent's Redis); without it they are refused. */
  stdin?: StdinChannel;
}

/**
 * An executor that runs one step of any kind except `shutdown` (which the agent loop handles
 * itself) and returns its outcome. It never throws: an executor bug or an unexpected system
 * error becomes an `internal` error result, so the loop always has something to report.
 */
export function createStepExecutor(options: StepExecutorOptions = {}): StepExecutor {
  // Shell sessions live as long as the executor (the agent): one set of them per sandbox.
  const shells = new ShellSessions();
  // Likewise the code interpreter's kernels.
  const code = new CodeContexts();
  return async (step, ctx) => {
    try {
      const outside = await leavesConfinement(step, ctx);
      if (outside) return inSandboxView(outside, ctx);
      return inSandboxView(await dispatch(step, ctx, options, shells, code), ctx);
    } catch (err) {
      const detail = err instanceof Error ? err.message : String(err);
      return inSandboxView(failed('internal', `${step.kind} step failed unexpectedly: ${detail}`), ctx);
    }
  };
}

/** A confined agent's file step whose path leads out of its directory through a link: refused before it runs. */
function leavesConfinement(step: Step, ctx: StepContext): Promise<StepOutcome | null> {
  if (!ctx.confineFiles || !('path' in step) || typeof step.path !== 'string') return Promise.resolve(null);
  const workingDirectory = 'workingDirectory' in step ? step.workingDirectory : null;
  return confinementFailure(ctx, resolveStepPath(ctx, workingDirectory, step.path));
}

/** The executor with Node's own child_process for run steps. */
export const executeStep: StepExecutor = createStepExecutor();

function dispatch(
  step: Step,
  ctx: StepContext,
  options: StepExecutorOptions,
  shells: ShellSessions,
  code: CodeContexts,
): Promise<StepOutcome> {
  switch (step.kind) {
    case 'run':
      return runStep(step, ctx, {
        launcher: options.launcher,
        ...(options.stdin ? { stdin: options.stdin } : {}),
      });
    case 'readFile':
      return readFileStep(step, ctx);
    case 'writeFile':
      return writeFileStep(step, ctx);
    case 'listFiles':
      return listFilesStep(step, ctx);
    case 'grep':
      return grepStep(step, ctx);
    case 'stats':
      return statsStep(step, ctx);
    case 'shell':
      return shells.run(step, ctx);
    case 'code':
      return code.run(step, ctx);
    case 'upload':
    case 'download':
      if (!options.transfers) {
        return Promise.resolve(
          failed('invalid_step', `${step.kind} steps need the agent's Redis connection`),
        );
      }
      return step.kind === 'upload'
        ? uploadStep(step, ctx, options.transfers)
        : downloadStep(step, ctx, options.transfers);
    case 'watch':
      return watchStep(step, ctx);
    case 'terminal':
      if (!options.terminals || !options.launcher) {
        return Promise.resolve(
          failed('invalid_step', "terminal steps need the agent's Redis connection and its spawner"),
        );
      }
      return terminalStep(step, ctx, { launcher: options.launcher, channel: options.terminals });
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
