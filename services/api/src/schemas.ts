import {
  CommandRecordSchema,
  JobSandboxSchema,
  JobStateSchema,
  ProblemExecResultSchema,
  SandboxEndReasonSchema,
  SandboxStateSchema,
  TenantSchema,
} from '@sandstream/bus';
import { ExecOptionsSchema, FOLLOW_CURSOR_PATTERN, GrepOptionsSchema } from '@sandstream/client';
import {
  FileEntrySchema,
  GrepMatchSchema,
  JobIdSchema,
  Limits,
  ShellSessionNameSchema,
  StepResultSchema,
  strictObject,
} from '@sandstream/wire';
import { z } from 'zod';

// Request schemas are the libs' own (the SDK's options, the specs, the wire's limits), picked and
// extended for HTTP; response schemas describe what the SDK returns. Both become the OpenAPI
// document (fastify-type-provider-zod), so the document cannot drift from the validation.

export const IdParams = strictObject({ id: JobIdSchema });
export const ExecIdParams = strictObject({ id: JobIdSchema, execId: z.string().min(1).max(160) });

/** Query numbers arrive as strings. */
export const queryInt = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
/** A query key given once or repeated (`?command=sh&command=-c`), as a list. */
const queryList = (max: number, what: string) =>
  z
    .union([z.string().max(Limits.stringMaxBytes), z.array(z.string().max(Limits.stringMaxBytes))])
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .refine((v) => v.length <= max, `${what}: at most ${max}`);
export const queryBool = z.enum(['true', 'false']).transform((v) => v === 'true');

export const CreateSandboxQuery = strictObject({
  /** `false`: answer 202 at once with the record (state queued); else wait until it is ready. */
  wait: queryBool.optional(),
  /** How long to wait for it to be ready (default 120 s). */
  timeoutSeconds: queryInt(1, 3600).optional(),
});

export const ConnectSandboxQuery = strictObject({
  /** How long to wait for it to be ready (default 120 s). */
  timeoutSeconds: queryInt(1, 3600).optional(),
});

export const ListSandboxesQuery = strictObject({
  state: SandboxStateSchema.optional(),
  tenant: TenantSchema.optional(),
  /** `key=value`, comma-separated: only sandboxes carrying every one of these labels. */
  labels: z.string().max(4096).optional(),
  limit: queryInt(1, 1000).optional(),
  /** Skip this many (newest first); the next page's offset comes in the `x-next-offset` header. */
  offset: queryInt(0, 999).optional(),
});

/** `state=running` or several, comma-separated (`state=queued,running`): one request for all of them. */
const JobStatesQuery = z
  .string()
  .max(256, 'state is at most 256 characters')
  .transform((v) => [...new Set(v.split(','))])
  .pipe(
    z.array(
      z.enum(JobStateSchema.options, {
        error: `state: each comma-separated value must be one of ${JobStateSchema.options.join(', ')}`,
      }),
    ),
  );

export const ListJobsQuery = strictObject({
  state: JobStatesQuery.optional(),
  tenant: TenantSchema.optional(),
  limit: queryInt(1, 1000).optional(),
  offset: ListSandboxesQuery.shape.offset,
});

const execShape = ExecOptionsSchema.pick({
  shell: true,
  cwd: true,
  env: true,
  timeoutSeconds: true,
  maxOutputBytes: true,
}).shape;

/**
 * A command as the SDK's exec takes it: `command` alone as a string runs through `/bin/sh -c`
 * (as seed 003's `{"command": "echo Hello World"}`); `command` with `args`, or an argv array,
 * runs the program directly unless `shell` says otherwise.
 */
export const ExecBody = strictObject(
  {
    command: z.union([
      z.string().min(1, 'command must not be empty').max(Limits.stringMaxBytes),
      z.array(z.string()).min(1, 'command must name a program').max(Limits.runMaxArgs),
    ]),
    args: z.array(z.string()).max(Limits.runMaxArgs).optional(),
    ...execShape,
    /** What the command reads on stdin: text, or bytes in base64 with stdinEncoding `base64`. */
    stdin: z
      .string()
      .max(Math.ceil(Limits.runStdinMaxBytes / 3) * 4)
      .optional(),
    stdinEncoding: z.enum(['utf8', 'base64']).optional(),
    /**
     * Keep the command's stdin open: POST …/processes/{commandId}/stdin writes to it, DELETE
     * there closes it (EOF). Not with `stdin`.
     */
    openStdin: z.boolean().optional(),
    /**
     * Run the command line in this long-lived shell of the sandbox (started on first use; its cd
     * and exports kept between commands), as the SDK's `sandbox.shell(name).run(command)`.
     */
    session: ShellSessionNameSchema.optional(),
  },
  { cmd: 'did you mean "command"?', timeout: 'did you mean "timeoutSeconds"? timeouts are in seconds' },
);
export type ExecBody = z.output<typeof ExecBody>;

export const StartProcessBody = strictObject({
  command: ExecBody.shape.command,
  args: ExecBody.shape.args,
  shell: execShape.shell,
  cwd: execShape.cwd,
  env: execShape.env,
  timeoutSeconds: execShape.timeoutSeconds,
});

export const KillProcessQuery = strictObject({
  signal: z.enum(['SIGTERM', 'SIGKILL', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2']).optional(),
});

export const PathQuery = strictObject({ path: z.string().min(1).max(4096) });

/** POST /v1/sandboxes/{id}/watch: a directory to watch (the SDK's files.watch). */
export const WatchBody = strictObject({
  path: PathQuery.shape.path,
  recursive: z.boolean().optional(),
  timeoutSeconds: z
    .number()
    .positive('timeoutSeconds must be positive')
    .max(Limits.runMaxTimeoutSeconds, `timeoutSeconds is at most ${Limits.runMaxTimeoutSeconds}`)
    .optional(),
});
export type WatchBody = z.output<typeof WatchBody>;
export const WriteFileQuery = strictObject({
  path: PathQuery.shape.path,
  /** Permission bits of a new file in octal, as chmod takes them: `755`, `0644`. */
  mode: z
    .string()
    .regex(/^[0-7]{3,4}$/, 'mode is 3 or 4 octal digits, e.g. 755')
    .transform((v) => Number.parseInt(v, 8))
    .optional(),
});
export const LsQuery = strictObject({
  path: z.string().min(1).max(4096).default('.'),
  maxDepth: queryInt(1, Limits.listFilesMaxDepth).optional(),
  maxEntries: queryInt(1, Limits.listFilesMaxEntries).optional(),
});
export const GrepQuery = strictObject({
  pattern: z.string().min(1).max(4096),
  path: GrepOptionsSchema.shape.path,
  glob: GrepOptionsSchema.shape.glob,
  ignoreCase: queryBool.optional(),
  fixedStrings: queryBool.optional(),
  maxMatches: queryInt(1, Limits.grepMaxMatches).optional(),
});
export const ArchiveQuery = strictObject({
  path: z.string().min(1).max(4096),
  maxBytes: queryInt(1, Limits.transferMaxBytes).optional(),
});
export const ShellQuery = strictObject({
  /** A named shell: reconnecting with the same name attaches to the one still running. */
  name: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/, 'name: letters, digits, "_", "." and "-", at most 64')
    .optional(),
  cols: queryInt(1, Limits.terminalMaxCols).optional(),
  rows: queryInt(1, Limits.terminalMaxRows).optional(),
  /** The program instead of the image's shell: its argv, one `command=` per word, in order. */
  command: queryList(Limits.runMaxArgs, 'command').optional(),
  /** `KEY=value`, one `env=` per variable, merged over the sandbox's environment. */
  env: queryList(256, 'env').optional(),
  cwd: z.string().min(1).max(4096).optional(),
  timeoutSeconds: queryInt(1, Limits.runMaxTimeoutSeconds).optional(),
  /** Attach to this running terminal (its command id) instead of opening one; closing leaves it running. */
  attach: z.string().min(1).max(160).optional(),
  /** A one-use ticket from POST /v1/auth/ws-ticket (browsers; never an API key in a URL). */
  ticket: z.string().max(128).optional(),
});
export const EventsQuery = strictObject({
  /** Resume after this entry (same as the Last-Event-ID header). */
  from: z
    .string()
    .regex(FOLLOW_CURSOR_PATTERN, 'from is an event id such as 1712345678901-0 or 1712345678901-0:2')
    .optional(),
  /**
   * `false`: only what the stream holds now, then an `end` event (what `sandstream logs` without
   * -f prints); default: follow to the terminal state.
   */
  follow: z.enum(['true', 'false'], { error: 'follow must be true or false' }).optional(),
});

// ---- responses

export const SandboxResponse = z
  .object({
    id: z.string(),
    tenant: z.string(),
    labels: z.record(z.string(), z.string()),
    state: SandboxStateSchema,
    reason: SandboxEndReasonSchema.optional(),
    message: z.string().optional(),
    spec: z.record(z.string(), z.unknown()),
    createdAt: z.number(),
    readyAt: z.number().optional(),
    endedAt: z.number().optional(),
    lastActivityAt: z.number().optional(),
    commandsRunning: z.number(),
    sandbox: JobSandboxSchema.optional(),
    /** While it is paused: when it paused. */
    pausedAt: z.number().optional(),
    /** How many times it resumed. */
    resumes: z.number(),
    /** When it ends of its lifetime (epoch ms), while ready: moved by POST …/timeout. */
    endsAt: z.number().optional(),
  })
  .meta({ id: 'Sandbox' });

export const PauseResponse = z
  .object({
    sandbox: SandboxResponse,
    /** Commands still running (or waiting) when the pause was asked: the pause stopped them. */
    stoppedCommands: z.array(z.string()),
  })
  .meta({ id: 'PauseResult' });

export const StepResultResponse = StepResultSchema.meta({ id: 'StepResult' });

export const JobResponse = z
  .object({
    id: z.string(),
    kind: z.enum(['job', 'sandbox']),
    tenant: z.string(),
    state: JobStateSchema,
    spec: z.unknown(),
    createdAt: z.number(),
    updatedAt: z.number(),
    finishedAt: z.number().optional(),
    readyAt: z.number().optional(),
    reason: z.string().optional(),
    cancelRequested: z.string().optional(),
    sandbox: JobSandboxSchema.optional(),
    stepResults: z.record(z.string(), StepResultSchema),
  })
  .meta({ id: 'Job' });

export const SubmitResponse = z.object({ jobId: z.string(), created: z.boolean() });

// The problem's command result with the error code widened to a string: the SDK's ExecResult does
// not narrow it, and the document should not promise more than the SDK returns.
export const ExecResultResponse = ProblemExecResultSchema.extend({
  errorCode: z.string().nullable().optional(),
}).meta({ id: 'ExecResult' });

export const HistoryEntryResponse = z.object({
  ...CommandRecordSchema.shape,
  result: StepResultSchema.optional(),
});

export const StatsResponse = z.object({
  cpuSeconds: z.number().nullable(),
  memoryBytes: z.number().nullable(),
  memoryLimitBytes: z.number().nullable(),
  workspaceBytes: z.number(),
  workspaceFiles: z.number(),
  workspaceTruncated: z.boolean(),
  diskBytes: z.number().nullable(),
  diskLimitBytes: z.number().nullable(),
  commandsRun: z.number(),
  commandsRunning: z.number(),
  outputLines: z.number(),
});

export const LsResponse = z.object({ entries: z.array(FileEntrySchema), truncated: z.boolean() });
export const GrepResponse = z.object({ matches: z.array(GrepMatchSchema), truncated: z.boolean() });
export const Accepted = z.object({ status: z.string() });

export const PidParams = strictObject({ id: JobIdSchema, pid: z.string().min(1).max(160) });
