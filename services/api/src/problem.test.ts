import {
  FileTemplateError,
  JobSpecError,
  type ProblemKind,
  ProblemKindSchema,
  problemKind,
  SandboxSpecError,
  TemplateNotFoundError,
  VolumeInUseError,
  VolumeNotFoundError,
} from '@sandstream/bus';
import {
  CommandCancelledError,
  errorOfProblem,
  InfrastructureUnavailableError,
  JobNotFoundError,
  SandboxClosedError,
  SandboxCodeError,
  SandboxCommandNotFoundError,
  SandboxConflictError,
  SandboxFileError,
  SandboxLimitError,
  SandboxNotFoundError,
  SandboxNotReadyError,
  SandboxPortUnreachableError,
  SandboxTimeoutError,
  SandstreamApiError,
  SandstreamOptionsError,
  SnapshotCorruptError,
} from '@sandstream/client';
import { STEP_ERROR_CODES } from '@sandstream/wire';
import type { FastifyRequest } from 'fastify';
import { describe, expect, it } from 'vitest';
import { HttpProblem, problemBody, problemOf } from './problem.js';

const request = { url: '/v1/sandboxes/s1/exec' } as FastifyRequest;

/** What the SDK reads back from the problem the API writes for `err`, as it travels (JSON). */
function roundTrip(err: unknown, subject: Parameters<typeof errorOfProblem>[1] = {}) {
  const body = JSON.parse(JSON.stringify(problemBody(request, problemOf(err))));
  return { body, back: errorOfProblem(body, subject) };
}

const cancelledResult = {
  commandId: 'cmd-1',
  exitCode: 137,
  durationMs: 40,
  timedOut: false,
  cancelled: true,
  stdout: 'partial\n',
  stderr: '',
  truncated: false,
  gaps: [],
  errorMessage: null,
  errorCode: undefined,
};

/** A Fastify refusal before any route (its own error codes): only its status is read. */
const fastifyError = (statusCode: number) =>
  Object.assign(new Error('refused'), { statusCode, code: 'FST_X' });

/**
 * One error the API meets for each kind, and the SDK class it must come back as: API → problem
 * → SDK error. The kinds covered must be the whole enum (checked below).
 */
const CASES: { kind: ProblemKind; err: unknown; back: new (...args: never[]) => Error; fields?: object }[] = [
  { kind: 'invalid-request', err: new SandstreamOptionsError('timeout: bad'), back: SandstreamOptionsError },
  { kind: 'invalid-spec', err: new JobSpecError('invalid job spec', ['a: b']), back: SandboxSpecError },
  { kind: 'invalid-yaml', err: new HttpProblem(400, 'invalid-yaml', 'no'), back: SandstreamApiError },
  { kind: 'invalid-message', err: new HttpProblem(400, 'invalid-message', 'no'), back: SandstreamApiError },
  { kind: 'bad-request', err: fastifyError(400), back: SandstreamApiError },
  { kind: 'unauthorized', err: new HttpProblem(401, 'unauthorized', 'no'), back: SandstreamApiError },
  { kind: 'forbidden', err: new HttpProblem(403, 'forbidden', 'no'), back: SandstreamApiError },
  {
    kind: 'not-found',
    err: new SandboxNotFoundError('s1'),
    back: SandboxNotFoundError,
    fields: { sandboxId: 's1' },
  },
  { kind: 'method-not-allowed', err: fastifyError(405), back: SandstreamApiError },
  { kind: 'not-acceptable', err: fastifyError(406), back: SandstreamApiError },
  { kind: 'conflict', err: new SandboxConflictError('id x is taken'), back: SandboxConflictError },
  {
    kind: 'volume-not-found',
    err: new VolumeNotFoundError('data'),
    back: VolumeNotFoundError,
    fields: { volume: 'data', message: 'volume data not found' },
  },
  {
    kind: 'volume-in-use',
    err: new VolumeInUseError('data', 's9', 'volume data is mounted read-write by sandbox s9'),
    back: VolumeInUseError,
    fields: { volume: 'data', holder: 's9', message: 'volume data is mounted read-write by sandbox s9' },
  },
  {
    kind: 'template-not-found',
    err: new TemplateNotFoundError('gone'),
    back: TemplateNotFoundError,
    fields: { template: 'gone', message: 'no built template named "gone"' },
  },
  {
    kind: 'template-in-file',
    err: new FileTemplateError('warm'),
    back: FileTemplateError,
    fields: { template: 'warm', message: expect.stringContaining('SANDSTREAM_TEMPLATES_FILE') },
  },
  {
    kind: 'sandbox-not-ready',
    err: new SandboxNotReadyError('sandbox s1 is not ready yet (creating)'),
    back: SandboxNotReadyError,
  },
  {
    kind: 'port-unreachable',
    err: new SandboxPortUnreachableError(3000, 'nothing answers on port 3000 of sandbox s1'),
    back: SandboxPortUnreachableError,
    fields: { port: 3000 },
  },
  {
    kind: 'sandbox-closed',
    err: new SandboxClosedError('s1', 'failed', 'start-failed', 'image: not found'),
    back: SandboxClosedError,
    fields: {
      sandboxId: 's1',
      state: 'failed',
      reason: 'start-failed',
      message: 'sandbox s1 is failed (start-failed): image: not found',
    },
  },
  {
    kind: 'cancelled',
    err: new CommandCancelledError(cancelledResult),
    back: CommandCancelledError,
    fields: { message: 'command cmd-1 was cancelled', result: cancelledResult },
  },
  { kind: 'body-too-large', err: fastifyError(413), back: SandboxLimitError },
  { kind: 'uri-too-long', err: fastifyError(414), back: SandstreamApiError },
  { kind: 'unsupported-media-type', err: fastifyError(415), back: SandstreamApiError },
  { kind: 'upgrade-required', err: new HttpProblem(426, 'upgrade-required', 'no'), back: SandstreamApiError },
  { kind: 'sandbox-limit', err: new SandboxLimitError('stdin is over 1 MiB'), back: SandboxLimitError },
  {
    kind: 'snapshot-corrupt',
    err: new SnapshotCorruptError('snapshot snap-1 is truncated in storage'),
    back: SnapshotCorruptError,
    fields: { message: 'snapshot snap-1 is truncated in storage' },
  },
  { kind: 'rate-limited', err: new HttpProblem(429, 'rate-limited', 'no'), back: SandstreamApiError },
  {
    kind: 'too-many-open-requests',
    err: new HttpProblem(429, 'too-many-open-requests', 'no'),
    back: SandstreamApiError,
  },
  { kind: 'headers-too-large', err: fastifyError(431), back: SandstreamApiError },
  { kind: 'internal', err: new Error('a secret'), back: SandstreamApiError, fields: { status: 500 } },
  {
    kind: 'infrastructure-unavailable',
    err: new InfrastructureUnavailableError('redis down'),
    back: InfrastructureUnavailableError,
  },
  { kind: 'timeout', err: new SandboxTimeoutError('not ready in 5 s'), back: SandboxTimeoutError },
  ...STEP_ERROR_CODES.map((code) => ({
    kind: `file-${code.replaceAll('_', '-')}` as ProblemKind,
    err: new SandboxFileError(`${code} happened`, code),
    back: SandboxFileError,
    fields: { code, message: `${code} happened` },
  })),
  { kind: 'file-error', err: new SandboxFileError('failed', undefined), back: SandboxFileError },
  {
    kind: 'code-error',
    err: new SandboxCodeError('python3 was not found in the sandbox', 'spawn_failed'),
    back: SandboxCodeError,
    fields: { message: 'python3 was not found in the sandbox' },
  },
];

describe('problems both ways: API error → problem → SDK error', () => {
  it('the cases cover every kind of the enum', () => {
    expect(new Set(CASES.map((c) => c.kind))).toEqual(new Set(ProblemKindSchema.options));
  });

  it.each(CASES)('$kind', ({ kind, err, back, fields }) => {
    const { body, back: error } = roundTrip(err, { sandboxId: 's1' });
    expect(problemKind(body.type)).toBe(kind);
    expect(error).toBeInstanceOf(back);
    if (fields) expect(error).toMatchObject(fields);
  });

  it('a command that is not found keeps its sandbox and command ids', () => {
    const { body, back } = roundTrip(new SandboxCommandNotFoundError('s1', 'cmd-9'), { sandboxId: 's1' });
    expect(body).toMatchObject({ sandboxId: 's1', commandId: 'cmd-9' });
    expect(back).toBeInstanceOf(SandboxCommandNotFoundError);
    expect(back).toMatchObject({ sandboxId: 's1', commandId: 'cmd-9' });
  });

  it('a job that is not found is the job the request was about', () => {
    const { back } = roundTrip(new JobNotFoundError('j1', false), { jobId: 'j1' });
    expect(back).toBeInstanceOf(JobNotFoundError);
  });

  it('a closed sandbox without a reason or a detail comes back the same', () => {
    const { body, back } = roundTrip(new SandboxClosedError('s2', 'closing', undefined));
    expect(body).not.toHaveProperty('closedDetail');
    expect(back).toMatchObject({
      sandboxId: 's2',
      state: 'closing',
      reason: undefined,
      message: 'sandbox s2 is closing',
    });
  });
});
