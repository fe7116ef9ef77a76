import {
  ApiProblemSchema,
  FileTemplateError,
  fileProblemKind,
  JobSpecError,
  type ProblemKind,
  ProblemKinds,
  problemType,
  SandboxSpecError,
  TemplateNotFoundError,
  userJobId,
  VolumeInUseError,
  VolumeNotFoundError,
  withUserIds,
} from '@sandstream/bus';
import {
  CommandCancelledError,
  infrastructureErrorOf,
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
  SandstreamOptionsError,
  SnapshotCorruptError,
  SnapshotNotFoundError,
} from '@sandstream/client';
import { describeIssue, formatPath } from '@sandstream/wire';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import type { z } from 'zod';

/** Errors as RFC 9457 problem details (libs/bus, ApiProblemSchema), named for the OpenAPI document. */
export const ProblemSchema = ApiProblemSchema.meta({ id: 'Problem' });
export type Problem = z.infer<typeof ProblemSchema>;

/** An error the routes throw on purpose, with its status and kind. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly kind: ProblemKind,
    message: string,
    readonly errors?: Problem['errors'],
  ) {
    super(message);
  }
}

/**
 * Seconds a client is asked to wait (Retry-After) when Redis did not answer: ioredis reconnects
 * every ≤ 2 s, and a Redis restart takes a few seconds.
 */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

export const notFound = (what: string) => new HttpProblem(404, 'not-found', `${what} not found`);

const TITLES: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  426: 'Upgrade Required',
  429: 'Too Many Requests',
  431: 'Request Header Fields Too Large',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** "steps.0.command: command must not be empty" → field and rule. */
function splitIssue(line: string): { field: string; rule: string } {
  const at = line.indexOf(': ');
  return at === -1 ? { field: '', rule: line } : { field: line.slice(0, at), rule: line.slice(at + 2) };
}

/** Problem members beyond type, title, status, detail and instance: `errors` and the extensions. */
type ProblemExtras = Omit<Problem, 'type' | 'title' | 'status' | 'detail' | 'instance'>;

/** What problemOf makes of an error: its status, kind, detail and extension members. */
export interface ProblemOf extends ProblemExtras {
  status: number;
  kind: ProblemKind;
  detail: string;
}

/**
 * Fastify's own 4xx refusals (before a route runs), by status: its error codes are an open set.
 * Anything else (a 400 of a body that is not JSON …) is `bad-request`.
 */
const FASTIFY_KINDS: Record<number, ProblemKind> = {
  404: 'not-found',
  405: 'method-not-allowed',
  406: 'not-acceptable',
  413: 'body-too-large',
  414: 'uri-too-long',
  415: 'unsupported-media-type',
  431: 'headers-too-large',
};

/** What a closed sandbox's message says past its id, state and reason (SandboxClosedError). */
function closedDetail(err: SandboxClosedError): string | undefined {
  const head = `sandbox ${err.sandboxId} is ${err.state}${err.reason ? ` (${err.reason})` : ''}: `;
  return err.message.startsWith(head) ? err.message.slice(head.length) : undefined;
}

/** The problem an error stands for (anything unexpected is a 500 that reveals nothing). */
export function problemOf(err: unknown): ProblemOf {
  if (err instanceof HttpProblem) {
    return {
      status: err.status,
      kind: err.kind,
      detail: err.message,
      ...(err.errors ? { errors: err.errors } : {}),
    };
  }
  if (hasZodFastifySchemaValidationErrors(err)) {
    const where = (err as FastifyError).validationContext ?? 'body';
    const errors = err.validation.map((v) => {
      // The type provider flattens each zod issue (code → keyword, path → instancePath); put it
      // back together so it is worded as the CLI words it (describeIssue in libs/wire).
      const path = v.instancePath.split('/').filter((segment) => segment !== '');
      const issue = { ...v.params, code: v.keyword, path, message: v.message } as z.core.$ZodIssue;
      const described = describeIssue(issue);
      return {
        field: [where, formatPath(described.path)].filter(Boolean).join('.'),
        rule: described.message,
      };
    });
    return {
      status: 400,
      kind: 'invalid-request',
      detail: `invalid request: ${errors.map((e) => `${e.field}: ${e.rule}`).join('; ')}`,
      errors,
    };
  }
  if (err instanceof JobSpecError || err instanceof SandboxSpecError) {
    return { status: 400, kind: 'invalid-spec', detail: err.message, errors: err.issues.map(splitIssue) };
  }
  if (err instanceof SandstreamOptionsError)
    return { status: 400, kind: 'invalid-request', detail: err.message };
  if (err instanceof SandboxNotFoundError || err instanceof JobNotFoundError) {
    return { status: 404, kind: 'not-found', detail: err.message };
  }
  if (err instanceof SnapshotNotFoundError)
    return { status: 404, kind: 'not-found', detail: err.message, snapshotId: err.snapshotId };
  if (err instanceof SnapshotCorruptError)
    return { status: 422, kind: 'snapshot-corrupt', detail: err.message };
  if (err instanceof SandboxCommandNotFoundError) {
    return {
      status: 404,
      kind: 'not-found',
      detail: err.message,
      sandboxId: err.sandboxId,
      commandId: err.commandId,
    };
  }
  if (err instanceof SandboxConflictError) return { status: 409, kind: 'conflict', detail: err.message };
  if (err instanceof VolumeNotFoundError) {
    return { status: 404, kind: 'volume-not-found', detail: err.message, volume: err.volume };
  }
  if (err instanceof VolumeInUseError) {
    return {
      status: 409,
      kind: 'volume-in-use',
      detail: err.message,
      volume: err.volume,
      holder: err.holder,
    };
  }
  if (err instanceof TemplateNotFoundError)
    return { status: 404, kind: 'template-not-found', detail: err.message, template: err.template };
  if (err instanceof FileTemplateError)
    return { status: 409, kind: 'template-in-file', detail: err.message, template: err.template };
  if (err instanceof SandboxClosedError) {
    const said = closedDetail(err);
    return {
      status: 409,
      kind: 'sandbox-closed',
      detail: err.message,
      sandboxId: err.sandboxId,
      state: err.state,
      ...(err.reason ? { reason: err.reason } : {}),
      ...(said !== undefined ? { closedDetail: said } : {}),
    };
  }
  if (err instanceof SandboxNotReadyError)
    return { status: 409, kind: 'sandbox-not-ready', detail: err.message };
  if (err instanceof SandboxPortUnreachableError)
    return {
      status: 502,
      kind: 'port-unreachable',
      detail: err.message,
      ...(err.port !== undefined ? { port: err.port } : {}),
    };
  if (err instanceof SandboxLimitError) return { status: 429, kind: 'sandbox-limit', detail: err.message };
  if (err instanceof SandboxTimeoutError) return { status: 504, kind: 'timeout', detail: err.message };
  if (err instanceof CommandCancelledError) {
    return { status: 409, kind: ProblemKinds.cancelled, detail: err.message, result: err.result };
  }
  if (err instanceof SandboxCodeError) {
    return { status: err.code === 'invalid_step' ? 400 : 422, kind: 'code-error', detail: err.message };
  }
  if (err instanceof SandboxFileError) {
    const status =
      err.code === 'not_found'
        ? 404
        : err.code === 'limit_exceeded'
          ? 413
          : err.code === 'invalid_step'
            ? 400
            : 422;
    return { status, kind: fileProblemKind(err.code), detail: err.message };
  }
  // Redis did not answer (the SDK's typed error, or ioredis's own from the API's direct calls:
  // keys, rate limits, access checks): the request may be sent again, not a server fault.
  const unavailable = infrastructureErrorOf(err);
  if (unavailable) {
    return {
      status: 503,
      kind: ProblemKinds.infrastructureUnavailable,
      detail: 'Sandstream is unavailable: its Redis did not answer; try again shortly',
    };
  }
  const fastify = err as Partial<FastifyError>;
  if (typeof fastify.statusCode === 'number' && fastify.statusCode >= 400 && fastify.statusCode < 500) {
    const kind = FASTIFY_KINDS[fastify.statusCode] ?? 'bad-request';
    return { status: fastify.statusCode, kind, detail: fastify.message ?? 'bad request' };
  }
  return { status: 500, kind: 'internal', detail: 'internal error (logged with this request id)' };
}

export function problemBody(request: FastifyRequest, problem: ProblemOf): Problem {
  const { status, kind, detail, ...extras } = problem;
  return {
    type: problemType(kind),
    title: TITLES[status] ?? 'Error',
    status,
    // A message from below the API names the internal id: its user knows only their own.
    detail: withUserIds(detail),
    instance: request.url.length > 512 ? `${request.url.slice(0, 512)}…` : request.url,
    ...extras,
    // Ids named beside the detail are internal ones too (a volume's holder, a sandbox).
    ...(typeof extras.sandboxId === 'string' ? { sandboxId: userJobId(extras.sandboxId) } : {}),
    ...(typeof extras.holder === 'string' ? { holder: userJobId(extras.holder) } : {}),
  };
}

export function sendProblem(request: FastifyRequest, reply: FastifyReply, err: unknown): FastifyReply {
  let problem: ProblemOf;
  try {
    problem = problemOf(err);
  } catch (mappingError) {
    // The error handler itself must never fail: an unreadable error is a plain 500.
    request.log.error({ err, mappingError }, 'could not describe an error');
    problem = { status: 500, kind: 'internal', detail: 'internal error (logged with this request id)' };
  }
  if (problem.kind === ProblemKinds.infrastructureUnavailable) {
    // Not a fault of this service: logged as a warning, and the client told when to come back.
    request.log.warn({ err }, 'request failed: infrastructure unavailable');
    reply.header('retry-after', String(UNAVAILABLE_RETRY_AFTER_SECONDS));
  } else if (problem.status >= 500) request.log.error({ err }, 'request failed');
  if (problem.kind === 'body-too-large') {
    // Name the limit, as the SDK's SandboxLimitError over Redis does (refused from the
    // Content-Length alone, or once a streamed body went past it).
    const limit = request.routeOptions.bodyLimit;
    const length = Number(request.headers['content-length']);
    problem = {
      ...problem,
      detail: `the request body${Number.isFinite(length) && length > 0 ? ` (${length} bytes)` : ''} is over the API's limit of ${limit} bytes (API_BODY_LIMIT_BYTES)`,
    };
  }
  return reply
    .code(problem.status)
    .type('application/problem+json')
    .serializer((body: Problem) => JSON.stringify(body))
    .send(problemBody(request, problem));
}
