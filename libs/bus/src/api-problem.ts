import { StepErrorCodeSchema } from '@sandstream/wire';
import { z } from 'zod';
import { SandboxEndReasonSchema, SandboxStateSchema } from './sandbox-record.js';

/**
 * An error of the HTTP API as RFC 9457 problem details (`application/problem+json`): a stable
 * `type` per kind of problem, the HTTP status, a `detail` worded as the CLI words it, and for a
 * refused request every broken rule with the field it concerns. One definition for both ends:
 * services/api writes it (and documents it in its OpenAPI), the SDK's HTTP transport reads it
 * back into its own error classes by kind and extension fields alone, never by its wording.
 */
const PROBLEM_TYPE_PREFIX = 'urn:sandstream:problem:';

/**
 * Every kind of problem the API writes: a closed set, so that the SDK maps each back
 * (libs/client/src/http/problem-errors.ts, a table over this enum) and a new kind cannot be
 * written without one.
 */
export const ProblemKindSchema = z.enum([
  /** 400: the request broke a rule (`errors` says which). SandstreamOptionsError. */
  'invalid-request',
  /** 400: the job or sandbox spec broke a rule (`errors`). JobSpecError / SandboxSpecError. */
  'invalid-spec',
  /** 400: a YAML body did not parse. */
  'invalid-yaml',
  /** 400: a shell WebSocket frame was neither input nor resize. */
  'invalid-message',
  /** 400 and other 4xx Fastify refuses with before a route runs. */
  'bad-request',
  /** 401: no key, an unknown or revoked one. */
  'unauthorized',
  /** 403: the key may not do this (another tenant, not admin). */
  'forbidden',
  /** 404: no such sandbox, job, command (`commandId`) or route. */
  'not-found',
  /** 405, 406: Fastify's own refusals. */
  'method-not-allowed',
  'not-acceptable',
  /** 409: the id asked for is taken. SandboxConflictError. */
  'conflict',
  /** 404: the tenant has no volume of this name (`volume`). VolumeNotFoundError. */
  'volume-not-found',
  /** 409: a read-write mount or a delete of a volume a sandbox holds (`volume`, `holder`). VolumeInUseError. */
  'volume-in-use',
  /** 404: no built template has this name (`template`). TemplateNotFoundError. */
  'template-not-found',
  /** 409: a delete of the operator's template (`template`), which only its file changes. FileTemplateError. */
  'template-in-file',
  /** 409: the sandbox takes no more commands (`sandboxId`, `state`, `reason`). SandboxClosedError. */
  'sandbox-closed',
  /** 409: the sandbox is not ready yet (queued, creating): its ports cannot be reached. SandboxNotReadyError. */
  'sandbox-not-ready',
  /** 409: the command was cancelled (`result`). CommandCancelledError. */
  'cancelled',
  /** 413: the body is larger than the API reads. */
  'body-too-large',
  /** 414: a path segment is longer than any id. */
  'uri-too-long',
  /** 415: the body's content type is not one this route reads. */
  'unsupported-media-type',
  /** 426: a WebSocket endpoint asked without Upgrade. */
  'upgrade-required',
  /** 429: a command over a sandbox's limits, or a snapshot over the tenant's quota. SandboxLimitError. */
  'sandbox-limit',
  /** 422: a snapshot's stored bytes are damaged or truncated (the detail says how). SnapshotCorruptError. */
  'snapshot-corrupt',
  /** 429: the key's requests per minute are spent; retry after the detail's seconds. */
  'rate-limited',
  /** 429: the key has too many requests open at once on this replica. */
  'too-many-open-requests',
  /** 431: the request's headers are too large. */
  'headers-too-large',
  /** 502: nothing answers on the sandbox's port (`port`) that a preview URL proxies to. SandboxPortUnreachableError. */
  'port-unreachable',
  /** 500: anything unexpected (logged with the request id, nothing of it revealed). */
  'internal',
  /**
   * 503: Sandstream's infrastructure (Redis) did not answer; nothing was decided and the
   * request may be sent again after Retry-After. The SDK's InfrastructureUnavailableError.
   */
  'infrastructure-unavailable',
  /** 504: the sandbox did not become ready in time. SandboxTimeoutError. */
  'timeout',
  /** A file operation the agent refused, one per agent error code (StepErrorCode). SandboxFileError. */
  'file-invalid-step',
  'file-limit-exceeded',
  'file-not-found',
  'file-io-error',
  'file-spawn-failed',
  'file-timed-out',
  'file-cancelled',
  'file-sandbox-lost',
  'file-internal',
  /** A file operation that failed without an agent error code. */
  'file-error',
  /** 422 (400 for a context of another language): the code interpreter could not run the cell. SandboxCodeError. */
  'code-error',
]);
export type ProblemKind = z.infer<typeof ProblemKindSchema>;

/** Kinds by name, for the code that writes or tests for one. */
export const ProblemKinds = {
  infrastructureUnavailable: 'infrastructure-unavailable',
  tooManyOpenRequests: 'too-many-open-requests',
  cancelled: 'cancelled',
} as const satisfies Record<string, ProblemKind>;

/** A file problem's kind for the agent's error code (`not_found` → `file-not-found`). */
export const fileProblemKind = (code: string | undefined): ProblemKind => {
  const known = StepErrorCodeSchema.safeParse(code);
  return known.success ? (`file-${known.data.replaceAll('_', '-')}` as ProblemKind) : 'file-error';
};

/** The agent's error code a file problem's kind stands for (`file-not-found` → `not_found`). */
export const fileErrorCode = (kind: ProblemKind): string | undefined =>
  kind.startsWith('file-') && kind !== 'file-error' ? kind.slice(5).replaceAll('-', '_') : undefined;

/** A problem's `type` for its kind (`not-found` → `urn:sandstream:problem:not-found`). */
export const problemType = (kind: ProblemKind): string => `${PROBLEM_TYPE_PREFIX}${kind}`;

/** The kind a problem's `type` names; undefined when it is not one of ours (a proxy's). */
export const problemKind = (type: string): ProblemKind | undefined => {
  if (!type.startsWith(PROBLEM_TYPE_PREFIX)) return undefined;
  const kind = ProblemKindSchema.safeParse(type.slice(PROBLEM_TYPE_PREFIX.length));
  return kind.success ? kind.data : undefined;
};

/** The result of a cancelled command, as the SDK's ExecResult (kind `cancelled`). */
export const ProblemExecResultSchema = z.object({
  commandId: z.string(),
  exitCode: z.number().nullable(),
  durationMs: z.number(),
  timedOut: z.boolean(),
  cancelled: z.boolean(),
  stdout: z.string(),
  stderr: z.string(),
  truncated: z.boolean(),
  gaps: z.array(z.object({ from: z.number(), to: z.number() })),
  errorMessage: z.string().nullable(),
  errorCode: StepErrorCodeSchema.nullish(),
});

export const ApiProblemSchema = z.object({
  type: z.string().describe(`${PROBLEM_TYPE_PREFIX}<kind>`),
  title: z.string(),
  status: z.number().int(),
  detail: z.string(),
  instance: z.string().optional(),
  errors: z
    .array(z.object({ field: z.string(), rule: z.string() }))
    .optional()
    .describe('each broken rule of a refused request, with the field it concerns'),
  // Extension members (RFC 9457 §3.2): what the SDK's error of this kind carries, so that the
  // SDK rebuilds it from fields rather than from the wording of `detail`.
  sandboxId: z.string().optional().describe('sandbox-closed, not-found of a command: the sandbox'),
  commandId: z.string().optional().describe('not-found of a command: the command'),
  snapshotId: z.string().optional().describe('not-found of a snapshot: the snapshot'),
  port: z.number().int().optional().describe('port-unreachable: the sandbox port nothing answers on'),
  state: SandboxStateSchema.optional().describe('sandbox-closed: the state it is in'),
  reason: SandboxEndReasonSchema.optional().describe('sandbox-closed: why it ended'),
  closedDetail: z.string().optional().describe('sandbox-closed: what the sandbox said when it ended'),
  result: ProblemExecResultSchema.optional().describe('cancelled: the command result so far'),
  volume: z.string().optional().describe('volume-not-found, volume-in-use: the volume'),
  holder: z.string().optional().describe('volume-in-use: the sandbox that holds the volume'),
  template: z.string().optional().describe('template-not-found, template-in-file: the template'),
});
export type ApiProblem = z.infer<typeof ApiProblemSchema>;
