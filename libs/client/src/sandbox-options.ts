import { SandboxStateSchema, TenantSchema } from '@sandstream/bus';
import { Limits, strictObject, withoutNul } from '@sandstream/wire';
import { z } from 'zod';
import type { CommandOutputLine, OutputGap } from './command-output.js';

// Options of the live-sandbox calls: strict like every other SDK option (an unknown key is
// refused by name, with the nearest valid one). Timeouts are in seconds, as in job steps.

const fn = <T>(what: string) =>
  z.custom<T>((v) => typeof v === 'function', { message: `${what} must be a function` });
const signal = z.instanceof(AbortSignal, { message: 'signal must be an AbortSignal' }).optional();

export const CreateSandboxOptionsSchema = strictObject({
  /** Give up waiting for the sandbox to be ready after this long (it may still become ready). */
  timeoutSeconds: z.number().positive().optional(),
  /** `false`: resolve once it is queued, without waiting until it is ready (create only). */
  wait: z.boolean().optional(),
  signal,
});
export type CreateSandboxOptions = z.input<typeof CreateSandboxOptionsSchema>;

export const ConnectSandboxOptionsSchema = CreateSandboxOptionsSchema.extend({
  /** A paused sandbox: resume it (else connect refuses it with SandboxPausedError). */
  resume: z.boolean().optional(),
}).strict();
export type ConnectSandboxOptions = z.input<typeof ConnectSandboxOptionsSchema>;

export const ExecOptionsSchema = strictObject(
  {
    /** Run the command string through `/bin/sh -c` (a string command implies it). */
    shell: z.boolean().optional(),
    /** Working directory, relative to the sandbox's workspace or absolute. */
    cwd: withoutNul(z.string().min(1).max(4096), 'cwd').optional(),
    /** Merged over the sandbox's environment. Travels through Redis: no secrets. */
    env: z
      .record(withoutNul(z.string(), 'an environment name'), withoutNul(z.string(), 'an environment value'))
      .optional(),
    timeoutSeconds: z
      .number()
      .positive('timeoutSeconds must be positive')
      .max(Limits.runMaxTimeoutSeconds, `timeoutSeconds is at most ${Limits.runMaxTimeoutSeconds}`)
      .optional(),
    /** What the command reads on stdin (text, or bytes), at most 8 MiB; without it, nothing. */
    stdin: z
      .union([z.string(), z.custom<Uint8Array>((v) => v instanceof Uint8Array)], {
        message: 'stdin must be a string or a Uint8Array',
      })
      .optional(),
    /**
     * Keep stdin open while it runs: write to it with sandbox.writeStdin(commandId, …) from any
     * client, end it with closeStdin (the command reads EOF). Not with `stdin`.
     */
    openStdin: z.boolean().optional(),
    /** Each of stdout and stderr kept in the result up to this many bytes (default 1 MiB). */
    maxOutputBytes: z
      .number()
      .int()
      .positive()
      .max(64 * 1024 * 1024)
      .optional(),
    onStdout: fn<(line: string) => void>('onStdout').optional(),
    onStderr: fn<(line: string) => void>('onStderr').optional(),
    /** Told each gap in the output where it happens (lines the stream no longer held). */
    onGap: fn<(gap: OutputGap) => void>('onGap').optional(),
    /** Told the command's id once the sandbox took it, before any output (to cancel it from elsewhere). */
    onStart: fn<(commandId: string) => void>('onStart').optional(),
    /** Aborting kills the command's whole process tree (from this or any client). */
    signal,
  },
  {
    timeout: 'did you mean "timeoutSeconds"? timeouts are in seconds',
    timeoutMs: 'did you mean "timeoutSeconds"? timeouts are in seconds',
    workingDirectory: 'did you mean "cwd"?',
  },
);
export type ExecOptions = z.input<typeof ExecOptionsSchema>;

/**
 * A background process (processes.start): how it is started, as exec's; its timeout defaults
 * to the longest allowed (24 h), closing the sandbox kills it anyway.
 */
export const StartProcessOptionsSchema = ExecOptionsSchema.pick({
  shell: true,
  cwd: true,
  env: true,
  timeoutSeconds: true,
});
export type StartProcessOptions = z.input<typeof StartProcessOptionsSchema>;

/** A terminal (Sandbox.terminals.open): what runs on it, and its window. */
export const TerminalOptionsSchema = strictObject(
  {
    /** argv of the program; default: the image's shell (bash, else sh). */
    command: z.array(z.string()).min(1, 'command must name a program').optional(),
    cols: z
      .number()
      .int()
      .min(1)
      .max(Limits.terminalMaxCols, `cols is at most ${Limits.terminalMaxCols}`)
      .optional(),
    rows: z
      .number()
      .int()
      .min(1)
      .max(Limits.terminalMaxRows, `rows is at most ${Limits.terminalMaxRows}`)
      .optional(),
    cwd: ExecOptionsSchema.shape.cwd,
    /** Merged over the sandbox's environment (TERM defaults to xterm-256color). No secrets. */
    env: ExecOptionsSchema.shape.env,
    /** Hung up after this long (default and limit: 24 h); closing the sandbox hangs it up anyway. */
    timeoutSeconds: ExecOptionsSchema.shape.timeoutSeconds,
  },
  { columns: 'did you mean "cols"?', size: 'give "cols" and "rows"' },
);
export type TerminalOptions = z.input<typeof TerminalOptionsSchema>;

/** Following a command another client started: only how its output is delivered. */
export const AttachOptionsSchema = ExecOptionsSchema.pick({
  maxOutputBytes: true,
  onStdout: true,
  onStderr: true,
  onGap: true,
  signal: true,
}).extend({
  /**
   * Aborting stops following (within a second) and leaves the command running, where aborting
   * `signal` kills it: a follower that goes away. The follow then ends quietly: its iteration
   * stops and it resolves to what was seen, with `stillRunning: true` and `exitCode: null`.
   */
  stopFollowing: signal,
});
export type AttachOptions = z.input<typeof AttachOptionsSchema>;
export type { CommandOutputLine };

/** A shell command: its timeout, and how its output is delivered. */
export const ShellRunOptionsSchema = ExecOptionsSchema.pick({
  timeoutSeconds: true,
  maxOutputBytes: true,
  onStdout: true,
  onStderr: true,
  onGap: true,
  onStart: true,
  signal: true,
});
export type ShellRunOptions = z.input<typeof ShellRunOptionsSchema>;

export const ListSandboxesOptionsSchema = strictObject({
  state: SandboxStateSchema.optional(),
  tenant: TenantSchema.optional(),
  /** Only sandboxes carrying every one of these labels. */
  labels: z.record(z.string(), z.string()).optional(),
  /** Newest first; at most this many (default 100, max 1000). */
  limit: z.number().int().min(1).max(1000).optional(),
});
export type ListSandboxesOptions = z.input<typeof ListSandboxesOptionsSchema>;

export const ListFilesOptionsSchema = strictObject({
  maxDepth: z.number().int().min(1).max(Limits.listFilesMaxDepth).optional(),
  maxEntries: z.number().int().min(1).max(Limits.listFilesMaxEntries).optional(),
});
export type ListFilesOptions = z.input<typeof ListFilesOptionsSchema>;

export const GrepOptionsSchema = strictObject({
  path: z.string().min(1).max(4096).optional(),
  glob: z.string().max(1024).optional(),
  ignoreCase: z.boolean().optional(),
  fixedStrings: z.boolean().optional(),
  maxMatches: z.number().int().min(1).max(Limits.grepMaxMatches).optional(),
});
export type GrepOptions = z.input<typeof GrepOptionsSchema>;

export const TransferOptionsSchema = strictObject({
  /** The largest tree (tar bytes) this transfer accepts; default 1 GiB, at most 16 GiB. */
  maxBytes: z.number().int().positive().max(Limits.transferMaxBytes).optional(),
});
export type TransferOptions = z.input<typeof TransferOptionsSchema>;

/** `files.read(path, options)`: what the content comes as. */
export const ReadFileOptionsSchema = strictObject({
  /** `text` (default): a UTF-8 string; `bytes`: a Uint8Array of any file; `stream`: a Node Readable of it. */
  format: z.enum(['text', 'bytes', 'stream']).default('text'),
  /** bytes and stream: the largest file (as a tar stream) accepted; default 1 GiB. */
  maxBytes: TransferOptionsSchema.shape.maxBytes,
});
export type ReadFileOptions = z.input<typeof ReadFileOptionsSchema>;

export const WriteFileOptionsSchema = strictObject({
  /** Permission bits of a new file, e.g. 0o755. */
  mode: z.number().int().min(0).max(0o7777).optional(),
});
export type WriteFileOptions = z.input<typeof WriteFileOptionsSchema>;
