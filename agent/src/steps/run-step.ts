import { stat } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import type { RunStep } from '@sandstream/wire';
import { Limits, overLimit, stdinBytes } from '@sandstream/wire/lean';
import { agentEnvironment } from '../agent-environment.js';
import type { ProcessLauncher, StepProcess } from '../process/launcher.js';
import { NodeLauncher } from '../process/node-launcher.js';
import { CancelReason } from './cancel-reason.js';
import { type LineGate, LineSplitter } from './line-splitter.js';
import { failed } from './outcome.js';
import { stepDirectory } from './resolve-path.js';
import { StdinFile } from './stdin-file.js';
import type { StdinChannel, StdinStream } from './stdin-stream.js';
import type { OutputStream, StepContext, StepOutcome } from './step-context.js';
import { killStepTree, newStepMarker, STEP_MARKER_VARIABLE, type StepTree } from './step-tree.js';

/** Timings of a run step; each can be overridden (tests shorten them). */
export interface RunStepTimings {
  /** After a timeout: SIGTERM to the group, SIGKILL this much later. */
  timeoutGraceMs: number;
  /**
   * After a cancel or agent shutdown: shorter, because the caller waits for the answer. Also the
   * grace of what a step left running when its command ended.
   */
  cancelGraceMs: number;
  /**
   * After the command exits, how long to keep reading output that its background children
   * still write to the inherited pipes. Past this (or once the pipes close) whatever the step
   * left running gets SIGTERM, then SIGKILL after `cancelGraceMs` (step-tree.ts): a step leaves
   * no process behind; a service that must outlive its command is a background step. While the
   * output is held by back-pressure this clock does not run: it starts (again) once everything
   * held went out.
   */
  drainAfterExitMs: number;
  /** After SIGKILL, how long to keep killing the step's processes and wait for the pipes before completing anyway. */
  settleAfterKillMs: number;
}

export const DEFAULT_RUN_TIMINGS: RunStepTimings = {
  timeoutGraceMs: 2000,
  cancelGraceMs: 500,
  drainAfterExitMs: 1000,
  settleAfterKillMs: 200,
};

/** What a run step can be given besides the step: its timings, and who starts its process. */
export interface RunStepOptions extends Partial<RunStepTimings> {
  /** Default: Node's child_process (the agent passes the native spawner when it has one). */
  launcher?: ProcessLauncher;
  /** Where an open stdin (`stdinStream`) reads from (the agent's Redis); without it such steps are refused. */
  stdin?: StdinChannel;
}

const nodeLauncher = new NodeLauncher();

type StopReason = 'timeout' | 'cancel' | 'lost';

/**
 * Runs a `run` step: argv exec'd directly (no shell unless `step.shell`, then
 * `/bin/sh -c command sh args…`, so args are "$1"…), in its own process group, output split
 * into lines for `ctx.onLine`.
 *
 * Exit codes follow the shell convention: a process killed by signal N reports 128 + N
 * (SIGTERM 143, SIGKILL 137) with an errorMessage naming the signal, so a reader always gets
 * a number. Timeouts and cancels report the same code plus timedOut / cancelled and an errorCode.
 */
export async function runStep(
  step: RunStep,
  ctx: StepContext,
  options: RunStepOptions = {},
): Promise<StepOutcome> {
  const { launcher = nodeLauncher, stdin: stdinChannel, ...timings } = options;
  const t = { ...DEFAULT_RUN_TIMINGS, ...timings };
  if (ctx.signal.aborted) return failed('cancelled', 'step was cancelled before it started');

  // The working directory is checked only if the spawn fails (see supervise): on the usual path
  // an up-front stat costs a thread-pool round trip, i.e. one more wake-up of the agent per step.
  const cwd = stepDirectory(ctx.baseDirectory, step.workingDirectory);

  const [file, args] = step.shell
    ? ['/bin/sh', ['-c', step.command, 'sh', ...step.args]]
    : [step.command, step.args];
  if (stdinBytes(step) > Limits.runStdinMaxBytes) {
    return failed('limit_exceeded', overLimit('stdin', stdinBytes(step), Limits.runStdinMaxBytes));
  }
  if (step.stdinStream && step.stdin !== undefined) {
    return failed('invalid_step', 'a run step has either stdin or stdinStream, not both');
  }
  if (step.stdinStream && !stdinChannel) {
    return failed('invalid_step', "an open stdin (stdinStream) needs the agent's Redis connection");
  }
  let input: StdinFile | undefined;
  let stream: StdinStream | undefined;
  try {
    input = await StdinFile.create(step, ctx.baseDirectory);
    if (step.stdinStream) stream = await stdinChannel?.create(step.stepId, ctx.baseDirectory);
  } catch (err) {
    return failed('io_error', `stdin could not be prepared: ${message(err)}`);
  }
  let child: StepProcess;
  // Marks every process of this launch, so what it leaves behind is found and ended (step-tree.ts).
  const marker = newStepMarker(step.stepId);
  const env = { ...agentEnvironment(), ...step.env, [STEP_MARKER_VARIABLE]: marker };
  try {
    child = launcher.launch({ file, args, cwd, env, stdinPath: input?.path ?? stream?.path });
  } catch (err) {
    await input?.remove();
    await stream?.stop();
    // Node throws at once for some spawn errors, ENOTDIR from a working directory that is a file among them.
    const cwdProblem = await checkDirectory(cwd);
    if (cwdProblem) return failed('not_found', `workingDirectory ${cwdProblem}`);
    // Node validates argv and env synchronously (e.g. a NUL byte in an argument).
    return failed(
      'invalid_step',
      `command ${JSON.stringify(step.command)} could not be started: ${message(err)}`,
    );
  }
  if (input) {
    // The process opened it at its start (or never will): the file is no longer needed.
    const remove = () => void input.remove();
    child.once('spawn', remove);
    child.once('error', remove);
  }
  if (!stream) return supervise(child, step, ctx, t, cwd, marker);
  const open = stream;
  // Opened by the process as it started: from then on input flows; a failed start drops it.
  child.once('spawn', () => open.start());
  try {
    return await supervise(child, step, ctx, t, cwd, marker);
  } finally {
    await open.stop();
  }
}

/** The signal a cancel asked for (the agent aborts with a CancelReason), else SIGTERM. */
function cancelSignalOf(signal: AbortSignal): NodeJS.Signals {
  const reason: unknown = signal.reason;
  return reason instanceof CancelReason ? reason.signal : 'SIGTERM';
}

async function checkDirectory(dir: string): Promise<string | null> {
  try {
    const info = await stat(dir);
    return info.isDirectory() ? null : `${dir} is not a directory`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return `${dir} does not exist`;
    return `${dir} is not accessible: ${message(err)}`;
  }
}

/** The agent's environment with the step's variables over it (Node's spawn drops undefined values). */
export function childEnvironment(
  overrides: Readonly<Record<string, string>> | null | undefined,
): Record<string, string> {
  return { ...agentEnvironment(), ...overrides };
}

function supervise(
  child: StepProcess,
  step: RunStep,
  ctx: StepContext,
  t: RunStepTimings,
  cwd: string,
  marker: string,
): Promise<StepOutcome> {
  return new Promise<StepOutcome>((resolve) => {
    const tree = (): StepTree => ({ leader: child.pid as number, marker, reaper: child.reaper });
    let exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
    let stopReason: StopReason | null = null;
    let killing: Promise<{ hard: boolean }> = Promise.resolve({ hard: false });
    let outputError: unknown = null;
    let lostError: Error | null = null;
    let completing = false;
    let settled = false;
    let timeoutTimer: NodeJS.Timeout | undefined;
    /** When the step's timeout runs out (set at spawn). */
    let deadline = Number.POSITIVE_INFINITY;
    /** (Re)arms the step's timeout for what is left of it. */
    const armTimeout = () => {
      clearTimeout(timeoutTimer);
      timeoutTimer = setTimeout(
        () => {
          // Exited, but its output still held (the archive stalled): the timeout bounds that wait too.
          if (exit) {
            abandonHeld();
            complete();
          } else stop('timeout');
        },
        Math.max(0, deadline - Date.now()),
      );
    };
    let fallbackTimer: NodeJS.Timeout | undefined;
    /** Back-pressure: the child's output is paused and a splitter holds input until there is room. */
    let paused = false;
    /** The pipes ended (or we stopped waiting) while output was held: complete once it is out. */
    let completeWhenDrained = false;
    /** Set when a stopped step stops waiting for room: from then on lines are dropped and counted. */
    let holdingGivenUp = false;

    const deliver = (stream: OutputStream) => (line: string) => {
      // onLine belongs to the loop; if it throws we keep the child's pipes flowing and report it.
      try {
        ctx.onLine(stream, line);
      } catch (err) {
        outputError ??= err;
      }
    };
    const { acceptingLines, onDroppedLine, holdingLines, whenAccepting } = ctx;
    const gate = (stream: OutputStream): LineGate | undefined => {
      if (!acceptingLines || !onDroppedLine) return undefined;
      const holding =
        holdingLines && whenAccepting ? { holding: () => !holdingGivenUp && holdingLines.call(ctx) } : {};
      return {
        accepting: () => acceptingLines.call(ctx),
        dropped: () => onDroppedLine.call(ctx, stream),
        ...holding,
      };
    };
    const stdout = new LineSplitter(deliver('stdout'), undefined, gate('stdout'));
    const stderr = new LineSplitter(deliver('stderr'), undefined, gate('stderr'));

    /**
     * A splitter held input (the log archive is on and the stream is at its high water mark):
     * stop reading the child's output, so it blocks on its own full pipe, until there is room.
     * Without the archive the gate never holds, and output is taken as it comes.
     */
    const holdOutput = () => {
      if (paused || !whenAccepting) return;
      paused = true;
      child.pauseOutput();
      // Exited and held again after a resume: the step's own deadline still bounds the wait.
      if (exit && !stopReason) armTimeout();
      // The drain after the exit waits for the held output (resumeOutput starts it again).
      if (exit && !stopReason) clearTimeout(fallbackTimer);
      whenAccepting.call(ctx, resumeOutput);
    };
    const resumeOutput = () => {
      if (!paused) return;
      if (!stdout.resume() || !stderr.resume()) {
        whenAccepting?.call(ctx, resumeOutput);
        return;
      }
      paused = false;
      child.resumeOutput();
      if (exit) clearTimeout(timeoutTimer);
      if (completeWhenDrained) complete();
      else if (exit && !stopReason) completeAfter(t.drainAfterExitMs);
    };
    /** A stopped step does not wait for the archive: what is held is counted as dropped. */
    const abandonHeld = () => {
      holdingGivenUp = true;
      stdout.dropHeld();
      stderr.dropHeld();
      if (!paused) return;
      paused = false;
      child.resumeOutput();
    };
    child.on('stdout', (chunk: Buffer) => {
      if (!stdout.push(chunk)) holdOutput();
    });
    child.on('stderr', (chunk: Buffer) => {
      if (!stderr.push(chunk)) holdOutput();
    });

    const finish = (outcome: StepOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timeoutTimer);
      clearTimeout(fallbackTimer);
      ctx.signal.removeEventListener('abort', onAbort);
      // Whoever still holds the other ends (a background process) gets EPIPE, not our memory.
      child.closeOutput();
      resolve(outcome);
    };

    /** Output is over (pipes closed, or we stopped waiting): flush and answer once any kill is done. */
    const complete = () => {
      if (completing) return;
      if (paused) {
        if (!stopReason) {
          completeWhenDrained = true;
          return;
        }
        abandonHeld();
      }
      completing = true;
      stdout.end();
      stderr.end();
      // Ended by itself: what it left running (a `setsid` daemon, a double fork) ends with it.
      if (!stopReason && child.pid !== undefined) {
        killing = killStepTree(tree(), { graceMs: t.cancelGraceMs, settleMs: t.settleAfterKillMs })
          .then(() => ({ hard: false }))
          .catch(() => ({ hard: false }));
      }
      void killing.then(({ hard }) => finish(outcome(hard)));
    };

    /** Completes after `ms` unless the pipes close first. */
    const completeAfter = (ms: number) => {
      clearTimeout(fallbackTimer);
      fallbackTimer = setTimeout(complete, ms);
    };

    const stop = (reason: StopReason) => {
      if (stopReason || exit || child.pid === undefined) return;
      stopReason = reason;
      // A stopped step does not wait for the archive: what its child prints while it handles the
      // signal is counted as dropped rather than blocking it on a full pipe until the SIGKILL.
      abandonHeld();
      killing = killStepTree(tree(), {
        ...(reason === 'cancel' ? { signal: cancelSignalOf(ctx.signal) } : {}),
        graceMs: reason === 'timeout' ? t.timeoutGraceMs : reason === 'cancel' ? t.cancelGraceMs : 0,
        settleMs: t.settleAfterKillMs,
      }).catch(() => ({ hard: false }));
      // If something we could not attribute still holds the pipes, do not wait on it forever.
      void killing.then(() => completeAfter(t.settleAfterKillMs));
    };

    const onAbort = () => {
      // Once the command exited, only its background children's output is pending: stop reading
      // (and stop waiting for room for output still held).
      if (exit) {
        abandonHeld();
        complete();
      } else stop('cancel');
    };

    const outcome = (hard: boolean): StepOutcome => {
      const code = exit ? exitCodeOf(exit.code, exit.signal) : null;
      if (stopReason === 'timeout') {
        return {
          exitCode: code,
          timedOut: true,
          errorCode: 'timed_out',
          errorMessage: `timed out after ${step.timeoutSeconds} s; the process group got SIGTERM${
            hard ? `, then SIGKILL after ${t.timeoutGraceMs} ms` : ''
          }`,
        };
      }
      if (stopReason === 'cancel') {
        return {
          exitCode: code,
          timedOut: false,
          cancelled: true,
          errorCode: 'cancelled',
          errorMessage: `cancelled; the process group got SIGTERM${
            hard ? `, then SIGKILL after ${t.cancelGraceMs} ms` : ''
          }`,
        };
      }
      if (stopReason === 'lost') {
        return {
          exitCode: code,
          timedOut: false,
          errorCode: 'internal',
          errorMessage: `${lostError?.message ?? "the step's process was lost"}; its process group was killed`,
        };
      }
      if (outputError) {
        return {
          exitCode: code,
          timedOut: false,
          errorCode: 'internal',
          errorMessage: `the output handler failed: ${message(outputError)}`,
        };
      }
      const signalNote = exit?.signal ? `killed by signal ${exit.signal} (exit code ${code})` : null;
      return { exitCode: code, timedOut: false, errorMessage: signalNote };
    };

    child.once('error', (err: NodeJS.ErrnoException) => {
      if (child.pid !== undefined) {
        // After 'spawn': the launcher lost track of the process (the spawner helper died).
        // Nobody would see it end, so it is killed rather than left running unwatched.
        lostError = err;
        if (!exit) stop('lost');
        completeAfter(t.settleAfterKillMs);
        return;
      }
      // Before 'spawn' this is a failure to start (ENOENT, EACCES).
      // A missing working directory fails the spawn with the same ENOENT as a missing command:
      // look at the directory now to tell the two apart. The 'close' that Node emits after this
      // error must not answer first with an empty outcome.
      completing = true;
      void checkDirectory(cwd).then((cwdProblem) =>
        finish(
          cwdProblem
            ? failed('not_found', `workingDirectory ${cwdProblem}`)
            : failed('spawn_failed', spawnFailureMessage(step, err)),
        ),
      );
    });

    child.once('spawn', () => {
      deadline = Date.now() + step.timeoutSeconds * 1000;
      armTimeout();
      ctx.signal.addEventListener('abort', onAbort, { once: true });
      if (ctx.signal.aborted) onAbort();
    });

    child.once('exit', (code, signal) => {
      exit = { code, signal };
      // While output is held the step's timeout still bounds the wait for room.
      if (!paused) clearTimeout(timeoutTimer);
      // While a kill is under way its own settle bound applies; otherwise give background
      // children a moment to finish writing to the pipes they inherited (once nothing is held).
      if (!stopReason && !paused) completeAfter(t.drainAfterExitMs);
    });

    child.once('close', complete);
  });
}

export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number | null {
  if (code !== null) return code;
  if (signal === null) return null;
  const number = osConstants.signals[signal];
  return number === undefined ? null : 128 + number;
}

function spawnFailureMessage(step: RunStep, err: NodeJS.ErrnoException): string {
  const what = step.shell ? '/bin/sh' : JSON.stringify(step.command);
  switch (err.code) {
    case 'ENOENT':
      return `command ${what} not found${step.shell || step.command.includes('/') ? '' : ' on PATH'}`;
    case 'EACCES':
      return `command ${what} is not executable (permission denied)`;
    default:
      return `command ${what} could not be started: ${err.message}`;
  }
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
