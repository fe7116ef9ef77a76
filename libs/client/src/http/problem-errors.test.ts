import { JobSpecError, ProblemKindSchema, problemType, SandboxSpecError } from '@sandstream/bus';
import { describe, expect, it } from 'vitest';
import { SandstreamOptionsError } from '../client-options.js';
import { InfrastructureUnavailableError } from '../infrastructure-errors.js';
import { JobNotFoundError } from '../job-not-found.js';
import {
  CommandCancelledError,
  SandboxClosedError,
  SandboxCommandNotFoundError,
  SandboxConflictError,
  SandboxFileError,
  SandboxLimitError,
  SandboxNotFoundError,
  SandboxTimeoutError,
} from '../sandbox-errors.js';
import { ERROR_OF_KIND, errorOfProblem, ProblemBodySchema, SandstreamApiError } from './problem-errors.js';

const problem = (kind: string, status: number, detail: string, extras: Record<string, unknown> = {}) => ({
  type: `urn:sandstream:problem:${kind}`,
  title: 'x',
  status,
  detail,
  ...extras,
});

// The problem details services/api writes (problem.ts problemOf), back into the SDK's errors:
// the same classes and fields a caller gets over Redis.
describe('errorOfProblem', () => {
  it('a closed sandbox keeps its id, state, reason and message', () => {
    // The detail is worded differently on purpose: the fields alone say what the error is.
    const err = errorOfProblem(
      problem('sandbox-closed', 409, 'any wording', {
        sandboxId: 's1',
        state: 'failed',
        reason: 'start-failed',
        closedDetail: 'image not found',
      }),
      { sandboxId: 's1' },
    );
    expect(err).toBeInstanceOf(SandboxClosedError);
    expect(err).toMatchObject({ sandboxId: 's1', state: 'failed', reason: 'start-failed' });
    expect(err.message).toBe('sandbox s1 is failed (start-failed): image not found');
    expect(
      errorOfProblem(
        problem('sandbox-closed', 409, 'any wording', { sandboxId: 's2', state: 'closing' }),
        {},
      ),
    ).toMatchObject({
      sandboxId: 's2',
      state: 'closing',
      reason: undefined,
      message: 'sandbox s2 is closing',
    });
  });

  it('a 404 is the sandbox, the command or the job it was about', () => {
    expect(
      errorOfProblem(problem('not-found', 404, 'sandbox s1 not found'), { sandboxId: 's1' }),
    ).toBeInstanceOf(SandboxNotFoundError);
    const command = { sandboxId: 's1', commandId: 'cmd-9' };
    expect(
      errorOfProblem(problem('not-found', 404, 'any wording', command), { sandboxId: 's1' }),
    ).toMatchObject({
      name: 'SandboxCommandNotFoundError',
      sandboxId: 's1',
      commandId: 'cmd-9',
    });
    expect(errorOfProblem(problem('not-found', 404, 'any wording', command), {})).toBeInstanceOf(
      SandboxCommandNotFoundError,
    );
    // Wording alone is not read: without the fields a command's 404 is the sandbox's.
    expect(
      errorOfProblem(problem('not-found', 404, 'sandbox s1 has no command cmd-9'), { sandboxId: 's1' }),
    ).toBeInstanceOf(SandboxNotFoundError);
    const job = errorOfProblem(problem('not-found', 404, 'job j not found'), { jobId: 'j', seen: true });
    expect(job).toBeInstanceOf(JobNotFoundError);
    expect((job as JobNotFoundError).vanished).toBe(true);
  });

  it('a refused spec carries every field and rule, as the job or sandbox spec error', () => {
    const body = problem('invalid-spec', 400, 'invalid job spec', {
      errors: [{ field: 'steps.0.command', rule: 'command must not be empty' }],
    });
    const job = errorOfProblem(body, { spec: 'job' });
    expect(job).toBeInstanceOf(JobSpecError);
    expect((job as JobSpecError).issues).toEqual(['steps.0.command: command must not be empty']);
    expect(errorOfProblem(body, { spec: 'sandbox' })).toBeInstanceOf(SandboxSpecError);
    expect(errorOfProblem(problem('invalid-request', 400, 'body.timeout: unknown'), {})).toBeInstanceOf(
      SandstreamOptionsError,
    );
  });

  it('limits, conflicts, timeouts and file errors keep their kind; anything else is a SandstreamApiError', () => {
    expect(errorOfProblem(problem('sandbox-limit', 429, 'too many'), {})).toBeInstanceOf(SandboxLimitError);
    expect(errorOfProblem(problem('conflict', 409, 'id x is taken'), {})).toBeInstanceOf(
      SandboxConflictError,
    );
    expect(errorOfProblem(problem('timeout', 504, 'not ready'), {})).toBeInstanceOf(SandboxTimeoutError);
    const file = errorOfProblem(problem('file-not-found', 404, 'no such file: a.txt'), { sandboxId: 's' });
    expect(file).toBeInstanceOf(SandboxFileError);
    expect((file as SandboxFileError).code).toBe('not_found');
    const auth = errorOfProblem(problem('unauthorized', 401, 'an API key is required'), {});
    expect(auth).toBeInstanceOf(SandstreamApiError);
    expect(auth).toMatchObject({ status: 401, message: '401 an API key is required' });
  });

  it('an unavailable infrastructure (503) is InfrastructureUnavailableError, told by its kind alone', () => {
    const err = errorOfProblem(problem('infrastructure-unavailable', 503, 'any wording at all'), {
      sandboxId: 's',
    });
    expect(err).toBeInstanceOf(InfrastructureUnavailableError);
    expect(err.message).toBe('any wording at all');
  });

  it('a cancelled command is CommandCancelledError with its result', () => {
    const result = {
      commandId: 'cmd-1',
      exitCode: 137,
      durationMs: 12,
      timedOut: false,
      cancelled: true,
      stdout: 'a\n',
      stderr: '',
      truncated: false,
      gaps: [],
      errorMessage: null,
      errorCode: null,
    };
    const err = errorOfProblem(problem('cancelled', 409, 'command cmd-1 was cancelled', { result }), {});
    expect(err).toBeInstanceOf(CommandCancelledError);
    expect((err as CommandCancelledError).result).toMatchObject({
      commandId: 'cmd-1',
      exitCode: 137,
      stdout: 'a\n',
    });
    expect((err as CommandCancelledError).result.errorCode).toBeUndefined();
  });

  it('an extension value this SDK does not know is left out, not the whole problem refused', () => {
    const parsed = ProblemBodySchema.parse(
      problem('sandbox-closed', 409, 'sandbox s1 is failed (a-new-reason)', {
        sandboxId: 's1',
        state: 'failed',
        reason: 'a-new-reason',
      }),
    );
    expect(errorOfProblem(parsed, {})).toMatchObject({ sandboxId: 's1', state: 'failed', reason: undefined });
  });

  it('a type that is not ours (a proxy) is a SandstreamApiError', () => {
    const err = errorOfProblem({ type: 'about:blank', status: 502, detail: 'bad gateway' }, {});
    expect(err).toBeInstanceOf(SandstreamApiError);
    expect(err.message).toBe('502 bad gateway');
  });
});

// Every kind of the closed enum has its SDK error: a kind added to libs/bus without a mapping
// fails here (and does not compile), rather than reaching callers as a bare SandstreamApiError.
describe('every problem kind maps back', () => {
  it.each(ProblemKindSchema.options)('%s', (kind) => {
    expect(ERROR_OF_KIND[kind], kind).toBeTypeOf('function');
    const err = errorOfProblem({ type: problemType(kind), status: 400, detail: 'd' }, {});
    expect(err).toBeInstanceOf(Error);
  });
});
