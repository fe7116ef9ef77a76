import {
  ApiProblemSchema,
  FileTemplateError,
  fileErrorCode,
  JobSpecError,
  type ProblemKind,
  problemKind,
  SandboxSpecError,
  TemplateNotFoundError,
  VolumeInUseError,
  VolumeNotFoundError,
} from '@sandstream/bus';
import type { z } from 'zod';
import { SandstreamOptionsError } from '../client-options.js';
import { InfrastructureUnavailableError } from '../infrastructure-errors.js';
import { JobNotFoundError } from '../job-not-found.js';
import {
  CommandCancelledError,
  SandboxClosedError,
  SandboxCodeError,
  SandboxCommandNotFoundError,
  SandboxConflictError,
  SandboxFileError,
  SandboxLimitError,
  SandboxNotFoundError,
  SandboxPausedError,
  SandboxTimeoutError,
  SnapshotCorruptError,
  SnapshotNotFoundError,
} from '../sandbox-errors.js';
import { SandboxNotReadyError, SandboxPortUnreachableError } from '../sandbox-ports.js';

/**
 * An `application/problem+json` body as services/api writes it (ApiProblemSchema), read
 * leniently where a proxy's problem in between may differ: without a title; and an extension
 * member this SDK does not know the value of (a newer API's state or reason) is left out rather
 * than the whole problem refused.
 */
export const ProblemBodySchema = ApiProblemSchema.partial({ title: true }).extend({
  state: ApiProblemSchema.shape.state.catch(undefined),
  reason: ApiProblemSchema.shape.reason.catch(undefined),
  result: ApiProblemSchema.shape.result.catch(undefined),
});
export type ProblemBody = z.infer<typeof ProblemBodySchema>;

/**
 * The API refused or failed in a way no SDK error stands for (no key, a revoked one, a rate
 * limit, a server error): its status and problem details. The CLI exits 3 with its detail.
 */
export class SandstreamApiError extends Error {
  override readonly name = 'SandstreamApiError';
  constructor(
    readonly status: number,
    readonly problem: ProblemBody | undefined,
    message: string,
  ) {
    super(message);
  }
}

/** What a refused request was about: the same 404 means another thing for a job and a sandbox. */
export interface ProblemSubject {
  jobId?: string | undefined;
  sandboxId?: string | undefined;
  /** A job follow: whether it had been seen (a 404 then means it vanished). */
  seen?: boolean | undefined;
  /** A job spec rather than a sandbox spec was sent. */
  spec?: 'job' | 'sandbox' | undefined;
  /** The command an exec or its follow was about. */
  commandId?: string | undefined;
  /** The snapshot a restore or a snapshot call was about (a 404 may be the snapshot's). */
  snapshotId?: string | undefined;
}

/** Builds the SDK error of one kind from its problem (detail and extension members). */
type ErrorOfKind = (problem: ProblemBody, subject: ProblemSubject) => Error;

/** A refusal no SDK class stands for: the status and problem as they came. */
const apiError: ErrorOfKind = (problem) =>
  new SandstreamApiError(problem.status, problem, `${problem.status} ${problem.detail}`);

const fileError: ErrorOfKind = (problem) =>
  new SandboxFileError(problem.detail, fileErrorCode(problemKind(problem.type) ?? 'file-error'));

/**
 * The SDK error of every kind the API writes (a Record over the closed enum: a kind without an
 * entry does not compile), so that a caller catches the same classes over HTTP as over Redis
 * (and the CLI exits with the same codes). What an error carries comes from the problem's
 * extension members (sandboxId, commandId, state, reason, result), never from its wording.
 */
export const ERROR_OF_KIND: Record<ProblemKind, ErrorOfKind> = {
  'invalid-spec': (problem, subject) => {
    const issues = (problem.errors ?? []).map((e) => (e.field ? `${e.field}: ${e.rule}` : e.rule));
    return subject.spec === 'job'
      ? new JobSpecError(problem.detail, issues)
      : new SandboxSpecError(problem.detail, issues);
  },
  'invalid-request': (problem) => new SandstreamOptionsError(problem.detail),
  'invalid-yaml': apiError,
  'invalid-message': apiError,
  'bad-request': apiError,
  unauthorized: apiError,
  forbidden: apiError,
  'not-found': (problem, subject) => {
    if (problem.commandId !== undefined) {
      return new SandboxCommandNotFoundError(problem.sandboxId ?? subject.sandboxId ?? '', problem.commandId);
    }
    if (problem.snapshotId !== undefined) return new SnapshotNotFoundError(problem.snapshotId);
    if (subject.sandboxId !== undefined) return new SandboxNotFoundError(subject.sandboxId);
    if (subject.snapshotId !== undefined) return new SnapshotNotFoundError(subject.snapshotId);
    if (subject.jobId !== undefined) return new JobNotFoundError(subject.jobId, subject.seen ?? false);
    return new SandstreamApiError(problem.status, problem, problem.detail);
  },
  'method-not-allowed': apiError,
  'not-acceptable': apiError,
  conflict: (problem) => new SandboxConflictError(problem.detail),
  'volume-not-found': (problem) => new VolumeNotFoundError(problem.volume ?? ''),
  'volume-in-use': (problem) =>
    new VolumeInUseError(problem.volume ?? '', problem.holder ?? '', problem.detail),
  'template-not-found': (problem) => new TemplateNotFoundError(problem.template ?? ''),
  'template-in-file': (problem) => new FileTemplateError(problem.template ?? ''),
  'sandbox-not-ready': (problem) => new SandboxNotReadyError(problem.detail),
  'port-unreachable': (problem) => new SandboxPortUnreachableError(problem.port, problem.detail),
  'sandbox-closed': (problem, subject) =>
    problem.state === 'paused' || problem.state === 'pausing'
      ? new SandboxPausedError(problem.sandboxId ?? subject.sandboxId ?? '', problem.state)
      : problem.state !== undefined
        ? new SandboxClosedError(
            problem.sandboxId ?? subject.sandboxId ?? '',
            problem.state,
            problem.reason,
            problem.closedDetail,
          )
        : new SandboxClosedError(
            problem.sandboxId ?? subject.sandboxId ?? '',
            'closed',
            undefined,
            problem.detail,
          ),
  cancelled: (problem, subject) =>
    new CommandCancelledError(
      problem.result
        ? { ...problem.result, errorCode: problem.result.errorCode ?? undefined }
        : {
            // A proxy's or an older API's problem without the result: what little is known.
            commandId: subject.commandId ?? '',
            exitCode: null,
            durationMs: 0,
            timedOut: false,
            cancelled: true,
            stdout: '',
            stderr: '',
            truncated: true,
            gaps: [],
            errorMessage: problem.detail,
            errorCode: 'cancelled',
          },
    ),
  // A body the API refused before reading it whole: a limit, as over Redis (the detail names it).
  'body-too-large': (problem) => new SandboxLimitError(problem.detail),
  'uri-too-long': apiError,
  'unsupported-media-type': apiError,
  'upgrade-required': apiError,
  'sandbox-limit': (problem) => new SandboxLimitError(problem.detail),
  'snapshot-corrupt': (problem) => new SnapshotCorruptError(problem.detail),
  'rate-limited': apiError,
  'too-many-open-requests': apiError,
  'headers-too-large': apiError,
  internal: apiError,
  'infrastructure-unavailable': (problem) => new InfrastructureUnavailableError(problem.detail),
  timeout: (problem) => new SandboxTimeoutError(problem.detail),
  'file-invalid-step': fileError,
  'file-limit-exceeded': fileError,
  'file-not-found': fileError,
  'file-io-error': fileError,
  'file-spawn-failed': fileError,
  'file-timed-out': fileError,
  'file-cancelled': fileError,
  'file-sandbox-lost': fileError,
  'file-internal': fileError,
  'file-error': fileError,
  'code-error': (problem) => new SandboxCodeError(problem.detail, undefined),
};

/** The SDK error a problem stands for, by its kind alone (a kind not ours: SandstreamApiError). */
export function errorOfProblem(problem: ProblemBody, subject: ProblemSubject): Error {
  const kind = problemKind(problem.type);
  return kind === undefined ? apiError(problem, subject) : ERROR_OF_KIND[kind](problem, subject);
}
