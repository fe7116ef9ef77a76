import type { EventEmitter } from 'node:events';
import type { TerminalSize } from './spawner-protocol.js';

/** What a run step asks for: Node's spawn(file, args, { cwd, env }) with the agent's fixed stdio. */
export interface LaunchRequest {
  file: string;
  args: readonly string[];
  cwd: string;
  /** The child's whole environment. */
  env: Readonly<Record<string, string>>;
  /** A file the child reads as its stdin; absent: /dev/null. */
  stdinPath?: string | undefined;
  /**
   * Run it on a pseudo-terminal of this size (its stdin, stdout and stderr, and its controlling
   * terminal): output arrives as 'stdout' only, input goes through writeInput. Only the native
   * spawner can; the Node launcher refuses it.
   */
  terminal?: TerminalSize | undefined;
}

/** The events of a launched process, in the order a ChildProcess emits their counterparts. */
export interface StepProcessEvents {
  /** The process exists (its pid is set). */
  spawn: [];
  /** It could not be started (ENOENT, EACCES, a bad working directory: `code` says which). */
  error: [err: NodeJS.ErrnoException];
  stdout: [chunk: Buffer];
  stderr: [chunk: Buffer];
  /** The process ended; its output may still be arriving from children that inherited the pipes. */
  exit: [code: number | null, signal: NodeJS.Signals | null];
  /** Exit seen and both output pipes closed (or given up with closeOutput after the exit). */
  close: [];
}

/**
 * A process started for a run step: its own process group (pgid = pid), stdin from /dev/null (or
 * the step's stdin file),
 * stdout and stderr piped back to the agent.
 */
export interface StepProcess extends EventEmitter<StepProcessEvents> {
  readonly pid: number | undefined;
  /**
   * The child subreaper its orphans re-parent to (the spawner helper), if any: everything the
   * process leaves behind is found below it (steps/step-tree.ts).
   */
  readonly reaper: number | undefined;
  /** Stop reading its output: whoever still holds the pipes gets EPIPE, not the agent's memory. */
  closeOutput(): void;
  /**
   * Back-pressure: stop reading its output, so the process blocks once its pipe is full. A few
   * chunks already on their way may still arrive afterwards; the caller holds them. Exit is
   * still reported while paused, 'close' only after resumeOutput (the pipes end when drained).
   */
  pauseOutput(): void;
  /** Reads its output again after pauseOutput. */
  resumeOutput(): void;
  /** A terminal's input, as typed (a Ctrl-C is the byte 0x03). Ignored for a process on pipes. */
  writeInput(data: Buffer): void;
  /** A terminal's new window size. Ignored for a process on pipes. */
  resize(size: TerminalSize): void;
}

/** Starts run steps' processes. Implementations: Node's child_process, or the native spawner. */
export interface ProcessLauncher {
  /** For logs and benchmarks. */
  readonly name: string;
  /**
   * Starts a process. Throws synchronously for a request that can never run (a NUL byte in an
   * argument, an empty file name), as Node's spawn does; start failures arrive as 'error'.
   */
  launch(request: LaunchRequest): StepProcess;
  /** Lets the launcher's own resources go (the spawner helper exits). */
  close(): void;
}

/** The checks Node's spawn makes before starting anything, with the same kind of message. */
export function validateLaunchRequest(request: LaunchRequest): void {
  if (request.file.length === 0) throw new TypeError("The argument 'file' cannot be empty");
  const check = (what: string, value: string) => {
    if (value.includes('\u0000')) {
      throw new TypeError(`The argument '${what}' must be a string without null bytes`);
    }
  };
  check('file', request.file);
  check('options.cwd', request.cwd);
  for (const [i, arg] of request.args.entries()) check(`args[${i}]`, arg);
  for (const [name, value] of Object.entries(request.env))
    check(`options.env['${name}']`, `${name}=${value}`);
}
