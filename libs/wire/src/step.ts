import { randomUUID } from 'node:crypto';
import * as z from 'zod';
import { CodeContextIdSchema, CodeLanguageSchema } from './code.js';
import { TerminalIdSchema, TransferIdSchema } from './keys.js';
import { Limits } from './limits.js';
import { SCHEMA_VERSION, SchemaVersionSchema } from './schema-version.js';
import { TraceContextSchema } from './trace-context.js';

export * from './step-kinds.js';

/** Step ids are chosen by the producer; they only need to be short, printable and non-empty. */
export const StepIdSchema = z
  .string()
  .min(1, 'stepId must not be empty')
  .max(256, 'stepId is at most 256 characters');

const common = {
  schemaVersion: SchemaVersionSchema,
  stepId: StepIdSchema,
  /** Optional W3C trace context so the agent's span joins the job's trace. */
  traceContext: TraceContextSchema.optional(),
};

/**
 * Steps marked `parallel` run beside other parallel steps instead of one after another: the
 * services mark the commands of a live sandbox, so a file read is never queued behind a long
 * build. Raw steps (seeds/000) leave it out and keep strict FIFO order; a step without the mark
 * waits until every parallel step in flight has finished, and nothing starts while it runs.
 */
const parallel = z.boolean().optional().default(false);

/**
 * Refuses a NUL byte in a string the kernel takes as a C string (a path, a program, an argument,
 * an environment name or value), which ends it there: Node refuses such a string when the step
 * runs, so the step is refused where it is written (job file, SDK, API, live command) instead,
 * with its field named; the agent refuses it the same way, as an invalid step.
 */
export function withoutNul<T extends z.ZodType<string>>(schema: T, what: string): T {
  return schema.refine((value) => !value.includes('\0'), {
    message: `${what} must not contain a NUL byte (\\0)`,
  });
}

const pathField = (what: string) =>
  withoutNul(
    z.string().min(1, `${what} must not be empty`).max(4096, `${what} is at most 4096 characters`),
    what,
  );

const workingDirectory = withoutNul(z.string().max(4096), 'workingDirectory').nullish();

/** A step's environment, merged over the agent's: any name, but no NUL in a name or a value. */
const stepEnv = z.record(
  withoutNul(z.string(), 'an environment name'),
  withoutNul(z.string(), 'an environment value'),
);

const timeoutSeconds = z
  .number()
  .positive('timeoutSeconds must be positive')
  .max(Limits.runMaxTimeoutSeconds, `timeoutSeconds is at most ${Limits.runMaxTimeoutSeconds}`)
  .nullish();

/** A run or shell command's timeout; the default when absent. */
const commandTimeout = timeoutSeconds.transform((t) => t ?? Limits.runDefaultTimeoutSeconds);

/** How long a terminal or a watch stays open at most; the limit itself when absent. */
const openTimeout = timeoutSeconds.transform((t) => t ?? Limits.runMaxTimeoutSeconds);

export const RunStepSchema = z.object({
  ...common,
  kind: z.literal('run'),
  parallel,
  command: withoutNul(
    z
      .string()
      .min(1, 'command must not be empty')
      .max(64 * 1024),
    'command',
  ),
  args: z
    .array(withoutNul(z.string(), 'an argument'))
    .max(Limits.runMaxArgs, `a run step has at most ${Limits.runMaxArgs} arguments`)
    .nullish()
    .transform((a) => a ?? []),
  /** Run `command` through `/bin/sh -c command sh args…` (args become $1, $2, …). Off by default: argv is exec'd directly. */
  shell: z.boolean().optional().default(false),
  workingDirectory,
  /** Merged over the agent's own environment. Never put secrets here: this travels through Redis. */
  env: stepEnv.nullish(),
  timeoutSeconds: commandTimeout,
  /** What the command reads on stdin (absent: /dev/null), at most runStdinMaxBytes once decoded. */
  stdin: z.string().optional(),
  /** How `stdin` is written: `utf8` (the default) or `base64` for binary input. */
  stdinEncoding: z.enum(['utf8', 'base64']).optional(),
  /**
   * Keep stdin open while it runs: what clients write to the command's input list (wire
   * command-input.ts) reaches it as it comes, until one closes it (EOF). Not with `stdin`.
   */
  stdinStream: z.boolean().optional(),
  /**
   * A live sandbox's background process (a dev server): runs beside everything (with
   * `parallel`), outside the parallel-step limit, until it exits, is killed or the sandbox closes.
   */
  background: z.boolean().optional(),
});

export const ReadFileStepSchema = z.object({
  ...common,
  kind: z.literal('readFile'),
  parallel,
  path: pathField('path'),
  workingDirectory,
});

export const WriteFileStepSchema = z.object({
  ...common,
  kind: z.literal('writeFile'),
  parallel,
  path: pathField('path'),
  content: z.string(),
  encoding: z.enum(['utf8', 'base64']).optional().default('utf8'),
  /** Unix permission bits for a new file, e.g. 0o644 (420). */
  mode: z.number().int().min(0).max(0o7777).optional(),
  workingDirectory,
});

export const ListFilesStepSchema = z.object({
  ...common,
  kind: z.literal('listFiles'),
  parallel,
  path: pathField('path').optional().default('.'),
  /** 1 lists the directory's own entries; each level more descends one directory deeper. */
  maxDepth: z
    .number()
    .int()
    .min(1, 'maxDepth is at least 1')
    .max(Limits.listFilesMaxDepth, `maxDepth is at most ${Limits.listFilesMaxDepth}`)
    .optional()
    .default(1),
  maxEntries: z
    .number()
    .int()
    .min(1)
    .max(Limits.listFilesMaxEntries, `maxEntries is at most ${Limits.listFilesMaxEntries}`)
    .optional()
    .default(Limits.listFilesMaxEntries),
  workingDirectory,
});

export const GrepStepSchema = z.object({
  ...common,
  kind: z.literal('grep'),
  parallel,
  /** A regular expression (Rust regex syntax under ripgrep, JavaScript syntax in the fallback; the common subset behaves the same). */
  pattern: withoutNul(z.string().min(1, 'pattern must not be empty').max(4096), 'pattern'),
  path: pathField('path').optional().default('.'),
  /** Only search files whose name matches this glob, e.g. "*.ts". */
  glob: withoutNul(z.string().max(1024), 'glob').optional(),
  ignoreCase: z.boolean().optional().default(false),
  fixedStrings: z.boolean().optional().default(false),
  maxMatches: z
    .number()
    .int()
    .min(1)
    .max(Limits.grepMaxMatches, `maxMatches is at most ${Limits.grepMaxMatches}`)
    .optional()
    .default(Limits.grepDefaultMaxMatches),
  workingDirectory,
});

/** Shell session names: short, printable, one per long-lived shell in a sandbox. */
export const ShellSessionNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, 'a session name is 1 to 64 letters, digits, ".", "_" or "-"');

/**
 * A command for a long-lived shell of the sandbox (seeds/004): the session keeps its working
 * directory, environment and shell state between commands; commands of one session run in the
 * order they were sent. A session starts on first use (in `workingDirectory`, or the workspace).
 */
export const ShellStepSchema = z.object({
  ...common,
  kind: z.literal('shell'),
  parallel,
  session: ShellSessionNameSchema.optional().default('default'),
  command: withoutNul(
    z
      .string()
      .min(1, 'command must not be empty')
      .max(64 * 1024, 'command is at most 65536 characters'),
    'command',
  ),
  timeoutSeconds: commandTimeout,
  workingDirectory,
});

/**
 * One cell for the code interpreter (wire code.ts): runs in its context's kernel, started on
 * first use in `workingDirectory` (or the workspace). Cells of one context run in the order sent;
 * contexts run side by side. A timeout or cancel interrupts the cell and keeps the kernel.
 */
export const CodeStepSchema = z.object({
  ...common,
  kind: z.literal('code'),
  parallel,
  language: CodeLanguageSchema.optional().default('python'),
  /** Absent: the language's default context (defaultCodeContext). */
  context: CodeContextIdSchema.optional(),
  /** The cell; empty only starts the context's kernel (createCodeContext). */
  code: z
    .string()
    .refine(
      (code) => Buffer.byteLength(code, 'utf8') <= Limits.codeMaxBytes,
      `code is at most ${Limits.codeMaxBytes} bytes`,
    ),
  timeoutSeconds: commandTimeout,
  workingDirectory,
});

const transferFields = {
  /** The transfer's list (wire transferKey): the client and the agent stream the tar through it. */
  transfer: TransferIdSchema,
  maxBytes: z
    .number()
    .int()
    .positive()
    .max(Limits.transferMaxBytes, `maxBytes is at most ${Limits.transferMaxBytes}`)
    .optional()
    .default(Limits.transferDefaultMaxBytes),
};

/** Receives a tar stream from the transfer list and unpacks it into the directory `path`. */
export const UploadStepSchema = z.object({
  ...common,
  kind: z.literal('upload'),
  parallel,
  path: pathField('path'),
  ...transferFields,
  workingDirectory,
});

/** Packs `path` (a file or a directory, as its own top entry) into the transfer list as a tar stream. */
export const DownloadStepSchema = z.object({
  ...common,
  kind: z.literal('download'),
  parallel,
  path: pathField('path'),
  ...transferFields,
  workingDirectory,
});

/**
 * Resource use of the sandbox as its agent sees it: CPU and memory of the cgroup it runs in (the
 * sandbox's own on Docker and Kubernetes), and the size of its workspace.
 */
export const StatsStepSchema = z.object({
  ...common,
  kind: z.literal('stats'),
  parallel,
  workingDirectory,
});

/**
 * An interactive program on a pseudo-terminal (default: the image's shell), for a person at a
 * keyboard: input and window sizes come through the terminal's input list, raw output goes to
 * its output stream (wire terminal.ts), not to the sandbox's events. Runs in the background
 * (with `parallel`), until the program exits, the step is cancelled or the sandbox closes.
 */
export const TerminalStepSchema = z.object({
  ...common,
  kind: z.literal('terminal'),
  parallel,
  terminal: TerminalIdSchema,
  /** argv to run; absent: bash, else sh. */
  command: z
    .array(withoutNul(z.string().max(64 * 1024), 'an argument'))
    .min(1, 'command must name a program')
    .max(Limits.runMaxArgs, `a terminal command has at most ${Limits.runMaxArgs} arguments`)
    .optional(),
  cols: z
    .number()
    .int()
    .min(1, 'cols must be at least 1')
    .max(Limits.terminalMaxCols, `cols is at most ${Limits.terminalMaxCols}`)
    .optional()
    .default(80),
  rows: z
    .number()
    .int()
    .min(1, 'rows must be at least 1')
    .max(Limits.terminalMaxRows, `rows is at most ${Limits.terminalMaxRows}`)
    .optional()
    .default(24),
  /** Merged over the agent's environment; TERM defaults to xterm-256color. */
  env: stepEnv.nullish(),
  workingDirectory,
  /** How long it may stay open at most (default and limit: runMaxTimeoutSeconds). */
  timeoutSeconds: openTimeout,
});

/**
 * Watches a directory for changes (inotify; every directory below it with `recursive`) until the
 * step is cancelled, times out or the sandbox closes. Each change is one stdout line, a
 * WatchEvent as JSON (wire watch-event.ts). Runs in the background (with `parallel`).
 */
export const WatchStepSchema = z.object({
  ...common,
  kind: z.literal('watch'),
  parallel,
  path: pathField('path'),
  recursive: z.boolean().optional().default(false),
  workingDirectory,
  /** How long it may watch at most (default and limit: runMaxTimeoutSeconds). */
  timeoutSeconds: openTimeout,
});

export const ShutdownStepSchema = z.object({
  ...common,
  kind: z.literal('shutdown'),
});

/**
 * A Step as it travels on `sandbox:{jobId}:in`. `kind` defaults to `run` (seeds/000), unknown
 * fields are ignored, and defaults are filled so that readers never re-derive them.
 */
export const StepSchema = z.preprocess(
  (value) =>
    value !== null && typeof value === 'object' && !Array.isArray(value) && !('kind' in value)
      ? { ...value, kind: 'run' }
      : value,
  z.discriminatedUnion('kind', [
    RunStepSchema,
    ReadFileStepSchema,
    WriteFileStepSchema,
    ListFilesStepSchema,
    GrepStepSchema,
    StatsStepSchema,
    ShellStepSchema,
    UploadStepSchema,
    DownloadStepSchema,
    TerminalStepSchema,
    CodeStepSchema,
    WatchStepSchema,
    ShutdownStepSchema,
  ]),
);

export type Step = z.output<typeof StepSchema>;
/** What a producer may write: defaults may be left out, and a run step may omit its kind. */
export type StepInput =
  | (Omit<z.input<typeof RunStepSchema>, 'kind'> & { kind?: 'run' })
  | z.input<typeof ReadFileStepSchema>
  | z.input<typeof WriteFileStepSchema>
  | z.input<typeof ListFilesStepSchema>
  | z.input<typeof GrepStepSchema>
  | z.input<typeof StatsStepSchema>
  | z.input<typeof ShellStepSchema>
  | z.input<typeof UploadStepSchema>
  | z.input<typeof DownloadStepSchema>
  | z.input<typeof TerminalStepSchema>
  | z.input<typeof CodeStepSchema>
  | z.input<typeof WatchStepSchema>
  | z.input<typeof ShutdownStepSchema>;
export type RunStep = z.output<typeof RunStepSchema>;
export type ReadFileStep = z.output<typeof ReadFileStepSchema>;
export type WriteFileStep = z.output<typeof WriteFileStepSchema>;
export type ListFilesStep = z.output<typeof ListFilesStepSchema>;
export type GrepStep = z.output<typeof GrepStepSchema>;
export type StatsStep = z.output<typeof StatsStepSchema>;
export type ShellStep = z.output<typeof ShellStepSchema>;
export type UploadStep = z.output<typeof UploadStepSchema>;
export type DownloadStep = z.output<typeof DownloadStepSchema>;
export type TerminalStep = z.output<typeof TerminalStepSchema>;
export type CodeStep = z.output<typeof CodeStepSchema>;
export type WatchStep = z.output<typeof WatchStepSchema>;
export type ShutdownStep = z.output<typeof ShutdownStepSchema>;

/** A shutdown step with a fresh id: what every path that asks an agent to leave pushes. */
export function newShutdownStep(): ShutdownStep {
  return { schemaVersion: SCHEMA_VERSION, stepId: `shutdown-${randomUUID()}`, kind: 'shutdown' };
}
