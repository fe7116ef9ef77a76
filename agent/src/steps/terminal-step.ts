import type { TerminalStep } from '@sandstream/wire';
import type { ProcessLauncher, StepProcess } from '../process/launcher.js';
import { findShell, noShellMessage } from './find-shell.js';
import { failed } from './outcome.js';
import { killSession } from './process-group.js';
import { stepDirectory } from './resolve-path.js';
import { childEnvironment, exitCodeOf } from './run-step.js';
import type { StepContext, StepOutcome } from './step-context.js';
import type { TerminalChannel } from './terminal-channel.js';

/** Terminals one sandbox has open at most (each holds two Redis connections and a session). */
export const MAX_TERMINALS = 8;

/** After the program exits: output its jobs still write is read this long, then let go. */
const DRAIN_AFTER_EXIT_MS = 500;
/** On cancel, close or timeout: SIGHUP to the session, SIGKILL to what is left this much later. */
const HANGUP_GRACE_MS = 500;

export interface TerminalStepOptions {
  launcher: ProcessLauncher;
  channel: TerminalChannel;
}

let open = 0;

/**
 * Runs a terminal step: the program (default: the image's shell) on a pseudo-terminal of the
 * step's size, its output as it comes to the terminal's output stream, input and resizes from
 * its input list until it ends. Ends when the program exits (its exit code, 128 + N for signal
 * N), or on cancel, timeout or sandbox close, which hang up the whole session: every job the
 * shell started, whatever its process group.
 */
export async function terminalStep(
  step: TerminalStep,
  ctx: StepContext,
  options: TerminalStepOptions,
): Promise<StepOutcome> {
  if (ctx.signal.aborted) return failed('cancelled', 'cancelled before it started');
  if (open >= MAX_TERMINALS)
    return failed('limit_exceeded', `at most ${MAX_TERMINALS} terminals per sandbox`);
  let argv = step.command;
  if (!argv) {
    const shell = await findShell();
    if (!shell) return failed('spawn_failed', noShellMessage('terminals'));
    argv = [shell];
  }
  const [file, ...args] = argv as [string, ...string[]];
  let child: StepProcess;
  try {
    child = options.launcher.launch({
      file,
      args,
      cwd: stepDirectory(ctx.baseDirectory, step.workingDirectory),
      env: childEnvironment({ TERM: 'xterm-256color', ...step.env }),
      terminal: { cols: step.cols, rows: step.rows },
    });
  } catch (err) {
    return failed('spawn_failed', (err as Error).message);
  }
  open++;
  try {
    return await supervise(child, step, ctx, options.channel);
  } finally {
    open--;
  }
}

function supervise(
  child: StepProcess,
  step: TerminalStep,
  ctx: StepContext,
  channel: TerminalChannel,
): Promise<StepOutcome> {
  const link = channel.open(step.terminal);
  const inputDone = new AbortController();
  return new Promise<StepOutcome>((resolve) => {
    let exit: number | null = null;
    let stopped: 'timeout' | 'cancel' | null = null;
    let drain: NodeJS.Timeout | undefined;
    const timer = setTimeout(() => stop('timeout'), step.timeoutSeconds * 1000);

    const pump = async () => {
      for await (const message of link.input(inputDone.signal)) {
        if (message.kind === 'data') child.writeInput(message.data);
        else child.resize(message);
      }
    };

    const stop = (why: 'timeout' | 'cancel') => {
      if (stopped || child.pid === undefined) return;
      stopped = why;
      // Closing the master is the hangup; the session's members get SIGHUP, then SIGKILL.
      child.closeOutput();
      void killSession(child.pid, { graceMs: HANGUP_GRACE_MS, settleMs: 200 });
    };
    const onAbort = () => stop('cancel');

    child.on('stdout', (chunk) => link.write(chunk));
    child.once('spawn', () => {
      void pump();
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      if (ctx.signal.aborted) onAbort();
    });
    child.once('error', (err) => {
      if (child.pid === undefined) {
        clearTimeout(timer);
        inputDone.abort();
        link.close();
        resolve(
          failed(
            'spawn_failed',
            `terminal command ${JSON.stringify(step.command?.[0])} could not be started: ${err.message}`,
          ),
        );
      } else {
        // The spawner died: nobody relays this terminal any more.
        stop('cancel');
      }
    });
    child.once('exit', (code, signal) => {
      exit = exitCodeOf(code, signal);
      drain = setTimeout(() => child.closeOutput(), DRAIN_AFTER_EXIT_MS);
    });
    child.once('close', () => {
      clearTimeout(timer);
      clearTimeout(drain);
      ctx.signal.removeEventListener('abort', onAbort);
      inputDone.abort();
      void link.end(exit).then(() => {
        if (stopped === 'timeout') {
          resolve({
            ...failed(
              'timed_out',
              `the terminal was open ${step.timeoutSeconds} s, its limit; it was hung up`,
            ),
            exitCode: exit,
          });
        } else if (stopped === 'cancel') {
          resolve({ ...failed('cancelled', 'the terminal was hung up'), exitCode: exit, cancelled: true });
        } else {
          resolve({ exitCode: exit, timedOut: false, errorMessage: null });
        }
      });
    });
  });
}
