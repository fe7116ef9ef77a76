import {
  ApiProblemSchema,
  JobSpecError,
  ProblemKinds,
  problemKind,
  SandboxSpecError,
  SandboxStateSchema,
} from '@sandstream/bus';
import type { z } from 'zod';
import { SandstreamOptionsError } from '../client-options.js';
import { InfrastructureUnavailableError } from '../infrastructure-errors.js';
import { JobNotFoundError } from '../job-not-found.js';
import {
  SandboxClosedError,
  SandboxCommandNotFoundError,
  SandboxConflictError,
  SandboxFileError,
  SandboxLimitError,
  SandboxNotFoundError,
  SandboxTimeoutError,
} from '../sandbox-errors.js';

/**
 * An `application/problem+json` body as services/api writes it (ApiProblemSchema), read
 * leniently where a proxy's problem in between may differ: without a title.
 */
export const ProblemBodySchema = ApiProblemSchema.partial({ title: true });
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
}

const CLOSED = /^sandbox (\S+) is ([a-z]+)(?: \(([a-z-]+)\))?(?:: ([\s\S]*))?$/;
const NO_COMMAND = /^sandbox (\S+) has no command (\S+)$/;

/**
 * The SDK error a problem stands for, so that a caller catches the same classes over HTTP as
 * over Redis (and the CLI exits with the same codes). The API words each detail as the SDK's
 * error message does, which is how the ids and states are read back from it.
 */
export function errorOfProblem(problem: ProblemBody, subject: ProblemSubject): Error {
  const kind = problemKind(problem.type);
  const detail = problem.detail;
  switch (kind) {
    case 'invalid-spec': {
      const issues = (problem.errors ?? []).map((e) => (e.field ? `${e.field}: ${e.rule}` : e.rule));
      return subject.spec === 'job' ? new JobSpecError(detail, issues) : new SandboxSpecError(detail, issues);
    }
    case 'invalid-request':
      return new SandstreamOptionsError(detail);
    case 'not-found': {
      const command = NO_COMMAND.exec(detail);
      if (command) return new SandboxCommandNotFoundError(command[1] as string, command[2] as string);
      if (subject.sandboxId !== undefined) return new SandboxNotFoundError(subject.sandboxId);
      if (subject.jobId !== undefined) return new JobNotFoundError(subject.jobId, subject.seen ?? false);
      return new SandstreamApiError(problem.status, problem, detail);
    }
    case 'conflict':
      return new SandboxConflictError(detail);
    case 'sandbox-closed': {
      const closed = CLOSED.exec(detail);
      const state = SandboxStateSchema.safeParse(closed?.[2]);
      if (closed && state.success) {
        return new SandboxClosedError(
          closed[1] as string,
          state.data,
          closed[3] as SandboxClosedError['reason'],
          closed[4],
        );
      }
      return new SandboxClosedError(subject.sandboxId ?? '', 'closed', undefined, detail);
    }
    case 'sandbox-limit':
      return new SandboxLimitError(detail);
    case 'timeout':
      return new SandboxTimeoutError(detail);
    case ProblemKinds.infrastructureUnavailable:
      return new InfrastructureUnavailableError(detail);
    default:
      if (kind.startsWith('file-')) return new SandboxFileError(detail, kind.slice(5).replaceAll('-', '_'));
      return new SandstreamApiError(problem.status, problem, `${problem.status} ${detail}`);
  }
}
