import { NetworkPolicySchema, strictObject } from '@sandstream/wire';
import { z } from 'zod';
import {
  boundedSpecSize,
  describeSpecIssues,
  type JobSpec,
  JobSpecSchema,
  sandboxRequestFields,
} from './job-spec.js';
import { SnapshotIdSchema } from './snapshot-id.js';

/**
 * A live sandbox: created, then driven command by command by a client (an AI agent's tool loop),
 * then closed. Stored as a job record like a job's (same admission, creation, readiness, dispatch,
 * liveness, destroy and reaper), with `kind: 'sandbox'` and no declared steps; its commands are
 * added while it runs (sandbox-commands.ts).
 *
 * An edge where people type: strict at every depth, like the job spec.
 */
export const SANDBOX_DEFAULT_IDLE_TIMEOUT_SECONDS = 600;
export const SANDBOX_MAX_IDLE_TIMEOUT_SECONDS = 24 * 3600;
/** How long a paused sandbox is kept by default before the reaper closes it (the operator may cap it lower). */
export const SANDBOX_DEFAULT_PAUSED_RETENTION_SECONDS = 7 * 24 * 3600;
export const SANDBOX_MAX_PAUSED_RETENTION_SECONDS = 90 * 24 * 3600;

export const LiveSandboxSpecSchema = strictObject(
  {
    ...sandboxRequestFields,
    /** Set by the services when stored; a caller may leave it out or say `sandbox`. */
    kind: z.literal('sandbox').default('sandbox'),
    /** The workspace inside the sandbox, where commands run and relative paths start (default: the template's, else /work). */
    workingDirectory: z
      .string()
      .regex(/^\//, 'workingDirectory must be an absolute path')
      .max(4096, 'workingDirectory is at most 4096 characters')
      .optional(),
    /**
     * `{ egress: 'none' }` (or `deny-egress`): no network but the path to Redis; `{ egress: { allow:
     * [...] } }`: only those ranges, ports and domains. A request can only narrow its template's
     * network: `default` / `internet` keep the template's (services/scheduler template-resolver.ts).
     */
    network: z
      .union([z.enum(['default', 'deny-egress']), NetworkPolicySchema], {
        error:
          'network must be "default", "deny-egress" or { egress: "internet" | "none" | { allow: [CIDR | host:port | domain, …] } }',
      })
      .optional(),
    /**
     * Start with a snapshot's files (docs/snapshots.md). The snapshot's spec fills in what this
     * one leaves out (its image above all: a Docker snapshot holds changes to that image).
     */
    fromSnapshot: SnapshotIdSchema.optional(),
    /** Closed after this long with no client call and no command running. */
    idleTimeoutSeconds: z
      .number()
      .positive('idleTimeoutSeconds must be positive')
      .max(
        SANDBOX_MAX_IDLE_TIMEOUT_SECONDS,
        `idleTimeoutSeconds is at most ${SANDBOX_MAX_IDLE_TIMEOUT_SECONDS}`,
      )
      .default(SANDBOX_DEFAULT_IDLE_TIMEOUT_SECONDS),
    /**
     * What its idle limit does: `close` it (the default), or `pause` it (its files kept, its slot
     * and sandbox freed; `resume` brings it back under the same id).
     */
    onIdle: z.enum(['close', 'pause']).default('close'),
    /** A paused sandbox is closed (its kept files deleted) after this long; the operator may cap it. */
    pausedRetentionSeconds: z
      .number()
      .int('pausedRetentionSeconds must be a whole number of seconds')
      .positive('pausedRetentionSeconds must be positive')
      .max(
        SANDBOX_MAX_PAUSED_RETENTION_SECONDS,
        `pausedRetentionSeconds is at most ${SANDBOX_MAX_PAUSED_RETENTION_SECONDS} (90 days)`,
      )
      .default(SANDBOX_DEFAULT_PAUSED_RETENTION_SECONDS),
  },
  {
    steps: 'a live sandbox takes its commands one by one (exec); submit a job to declare steps up front',
    workdir: 'did you mean "workingDirectory"?',
    cwd: "the sandbox's directory is \"workingDirectory\"; a command's own is exec's cwd",
    onIdleTimeout: 'did you mean "onIdle"?',
    pauseRetentionSeconds: 'did you mean "pausedRetentionSeconds"?',
  },
)
  .refine(
    (spec) => spec.template !== undefined || spec.image !== undefined || spec.fromSnapshot !== undefined,
    {
      message: 'a sandbox needs a template, an image or a snapshot (fromSnapshot)',
      path: ['image'],
    },
  )
  .superRefine((spec, ctx) => boundedSpecSize(spec, ctx, 'the sandbox spec'));

export type LiveSandboxSpec = z.output<typeof LiveSandboxSpecSchema>;
export type LiveSandboxSpecInput = z.input<typeof LiveSandboxSpecSchema>;

export class SandboxSpecError extends Error {
  override readonly name = 'SandboxSpecError';
  constructor(
    message: string,
    readonly issues: string[],
  ) {
    super(message);
  }
}

export function parseLiveSandboxSpec(input: unknown, source?: string): LiveSandboxSpec {
  const parsed = LiveSandboxSpecSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const { error, issues } = describeSpecIssues(parsed.error, 'sandbox spec', source);
  throw new SandboxSpecError(error, issues);
}

/** What a job record holds: a job's spec or a live sandbox's. */
export type StoredSpec = JobSpec | LiveSandboxSpec;

export function isLiveSandboxSpec(spec: StoredSpec): spec is LiveSandboxSpec {
  return 'kind' in spec && spec.kind === 'sandbox';
}

/** Parses a stored spec by its kind (re-validated: a record edited by hand smuggles nothing). */
export function parseStoredSpec(value: unknown): StoredSpec {
  const live =
    value !== null && typeof value === 'object' && (value as { kind?: unknown }).kind === 'sandbox';
  return live ? LiveSandboxSpecSchema.parse(value) : JobSpecSchema.parse(value);
}
