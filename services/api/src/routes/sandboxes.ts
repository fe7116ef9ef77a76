import {
  JobField,
  LiveSandboxSpecSchema,
  SandboxPauseOptionsSchema,
  type SandboxRecord,
  SandboxSetTimeoutSchema,
  SnapshotIdSchema,
  userJobId,
} from '@sandstream/bus';
import { ExecutionSchema } from '@sandstream/client';
import { injectTraceContext } from '@sandstream/telemetry';
import { NetworkPolicySchema, strictObject } from '@sandstream/wire';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { checkAccess, principalOf, requireAccess } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { CodeBody, runCodeForRequest } from '../code-cell.js';
import { execForRequest } from '../exec-command.js';
import { streamTimeline } from '../job-events.js';
import { listScope, markEventsCursor, sendPage } from '../list-page.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { HttpProblem, notFound } from '../problem.js';
import {
  ConnectSandboxQuery,
  CreateSandboxQuery,
  EventsQuery,
  ExecBody,
  ExecIdParams,
  ExecResultResponse,
  HistoryEntryResponse,
  IdParams,
  ListSandboxesQuery,
  PauseResponse,
  SandboxResponse,
  StatsResponse,
} from '../schemas.js';
import { applySpecDefaults } from '../spec-defaults.js';
import { wantsEventStream } from '../sse.js';
import {
  CodeEventSchema,
  CommandEventSchema,
  eventStreamResponse,
  TimelineEventSchema,
} from '../sse-schemas.js';
import { snapshotWithUserIds, withUserId } from '../tenant-scope.js';
import { SnapshotResponse, snapshotsOf } from './snapshots.js';

const SnapshotBody = strictObject({ name: z.string().min(1).max(256).optional() });
const RestoreBody = strictObject({ snapshotId: SnapshotIdSchema });
const RestoreResponse = z
  .object({
    snapshotId: z.string(),
    stoppedCommands: z.array(z.string()),
    entries: z.number(),
    bytes: z.number(),
    removed: z.number(),
    frozenMs: z.number(),
  })
  .meta({ id: 'RestoreResult' });
const ForkBody = strictObject({
  count: z
    .number()
    .int('count must be a whole number')
    .min(1, 'count is at least 1')
    .max(100, 'count is at most 100'),
});

/** How long POST /v1/sandboxes waits for readiness when the request does not say. */
const DEFAULT_READY_SECONDS = 120;

const problems = problemResponses(403, 404, 409);

/** `a=1,b=2` → { a: '1', b: '2' }. */
function parseLabels(raw: string | undefined): Record<string, string> | undefined {
  if (raw === undefined) return undefined;
  const labels: Record<string, string> = {};
  for (const pair of raw.split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) {
      throw new HttpProblem(400, 'invalid-request', `labels: "${pair}" is not key=value`, [
        { field: 'querystring.labels', rule: 'comma-separated key=value pairs' },
      ]);
    }
    labels[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return labels;
}

/** The sandbox routes; `prefix` is /v1/sandboxes, or seed 003's /api/sandbox (same bodies). */
export function sandboxRoutes(ctx: ApiContext, tags: string[]): FastifyPluginAsyncZod {
  return async (app) => {
    const sandboxes = ctx.client.sandboxes;
    requireAccess(app, 'sandbox');
    // The route's id was checked before the handler (requireAccess).
    const owned = (id: string) => sandboxes.handle(id);
    const record = async (id: string): Promise<SandboxRecord> => {
      const found = await sandboxes.get(id);
      if (!found) throw notFound(`sandbox ${id}`);
      return withUserId(found);
    };

    app.post(
      '',
      {
        preValidation: applySpecDefaults(ctx),
        schema: {
          tags,
          summary: 'Create a sandbox (waits until it is ready unless ?wait=false)',
          body: LiveSandboxSpecSchema,
          querystring: CreateSandboxQuery,
          response: { 201: SandboxResponse, 202: SandboxResponse, ...problems, ...problemResponses(504) },
        },
      },
      async (request, reply) => {
        if (request.body.id !== undefined) {
          // Ids are per tenant (the body's id is already its tenant's internal id), so this
          // finds another tenant's record only for tenant default's plain ids, which the SDK may
          // have used for another tenant: refused as the SDK refuses it, without saying whose.
          // One of the caller's own is the same request again (idempotent).
          const [tenant] = await ctx.redis.hmget(ctx.keys.job(request.body.id), JobField.tenant);
          if (tenant !== null && tenant !== request.body.tenant)
            throw new HttpProblem(409, 'conflict', `id ${request.body.id} is taken`, [
              { field: 'body.id', rule: 'must not name another sandbox or job' },
            ]);
        }
        const wait = request.query.wait !== false;
        // The request's span (request-spans.ts) becomes the sandbox's trace, as submit() does for jobs.
        const traceContext = request.body.traceContext ?? injectTraceContext();
        // The record the readiness wait read as it turned ready: no second read before answering.
        const created = await sandboxes.createRecord(
          { ...request.body, ...(traceContext ? { traceContext } : {}) },
          {
            wait,
            timeoutSeconds: request.query.timeoutSeconds ?? DEFAULT_READY_SECONDS,
          },
        );
        return reply.code(wait ? 201 : 202).send(withUserId(created));
      },
    );

    // Snapshots of this sandbox (docs/snapshots.md); seed 003 says `/snapshot`, the v1 API `/snapshots`.
    for (const path of ['/:id/snapshots', '/:id/snapshot']) {
      app.post(
        path,
        {
          schema: {
            tags,
            summary: "Snapshot the sandbox's files (answers the snapshot, with its snapshotId)",
            params: IdParams,
            body: SnapshotBody.nullish(),
            response: { 201: SnapshotResponse, ...problems, ...problemResponses(429) },
          },
        },
        async (request, reply) => {
          const taken = await owned(request.params.id).snapshot(
            request.body?.name ? { name: request.body.name } : {},
          );
          return reply.code(201).send(snapshotWithUserIds(taken));
        },
      );
    }

    app.get(
      '/:id/snapshots',
      {
        schema: {
          tags,
          summary: 'Snapshots taken of this sandbox, newest first',
          params: IdParams,
          response: { 200: z.array(SnapshotResponse), ...problems },
        },
      },
      async (request) => {
        const all = await snapshotsOf(ctx, principalOf(request)).list();
        return all.filter((s) => s.fromSandbox === request.params.id).map(snapshotWithUserIds);
      },
    );

    app.put(
      '/:id/network',
      {
        schema: {
          tags,
          summary:
            "Replace a running sandbox's egress policy (new connections follow it on return; only as wide as its template allows)",
          params: IdParams,
          body: NetworkPolicySchema,
          response: { 200: NetworkPolicySchema, ...problems },
        },
      },
      async (request) => owned(request.params.id).network.update(request.body),
    );

    app.post(
      '/:id/restore',
      {
        schema: {
          tags,
          summary:
            "Make the sandbox's files exactly a snapshot's (running commands are stopped first and named)",
          params: IdParams,
          body: RestoreBody,
          response: { 200: RestoreResponse, ...problems, ...problemResponses(422) },
        },
      },
      async (request) => owned(request.params.id).restore(request.body.snapshotId),
    );

    app.post(
      '/:id/fork',
      {
        schema: {
          tags,
          summary: "New sandboxes (at most 100) that start with this one's files",
          params: IdParams,
          body: ForkBody,
          response: {
            201: z.object({ sandboxIds: z.array(z.string()) }),
            ...problems,
            ...problemResponses(429),
          },
        },
      },
      async (request, reply) => {
        const forks = await owned(request.params.id).fork({ count: request.body.count });
        return reply.code(201).send({ sandboxIds: forks.map((f) => userJobId(f.id)) });
      },
    );

    app.get(
      '',
      {
        schema: {
          tags,
          summary: 'List sandboxes (newest first; state, labels, tenant for admins)',
          querystring: ListSandboxesQuery,
          response: { 200: z.array(SandboxResponse), ...problems },
        },
      },
      async (request, reply) => {
        const labels = parseLabels(request.query.labels);
        const scope = listScope(principalOf(request), request.query.tenant);
        if (!scope) return [];
        const { tenant } = scope;
        await markEventsCursor(ctx, reply);
        return sendPage(reply, request.query, (limit) =>
          sandboxes
            .list({
              ...(request.query.state ? { state: request.query.state } : {}),
              ...(tenant ? { tenant } : {}),
              ...(labels ? { labels } : {}),
              limit,
            })
            .then((found) => found.map(withUserId)),
        );
      },
    );

    app.get(
      '/:id',
      {
        schema: {
          tags,
          summary: "A sandbox's record",
          params: IdParams,
          response: { 200: SandboxResponse, ...problems },
        },
      },
      async (request) => record(request.params.id),
    );

    app.delete(
      '/:id',
      {
        schema: {
          tags,
          summary: 'Close a sandbox (kills what runs in it); answers once it is closed',
          params: IdParams,
          response: { 200: SandboxResponse, ...problems, ...problemResponses(504) },
        },
      },
      async (request) => withUserId(await sandboxes.close(request.params.id)),
    );

    app.post(
      '/:id/pause',
      {
        schema: {
          tags,
          summary:
            'Pause a ready sandbox: its files, id, spec, labels and env are kept, its slot and sandbox freed; commands still running are stopped and named. Answers once it is paused',
          params: IdParams,
          body: SandboxPauseOptionsSchema.optional(),
          response: { 200: PauseResponse, ...problems, ...problemResponses(504) },
        },
      },
      async (request) => {
        const paused = await owned(request.params.id).pause(request.body ?? {});
        return { ...paused, sandbox: withUserId(paused.sandbox) };
      },
    );

    app.post(
      '/:id/resume',
      {
        schema: {
          tags,
          summary:
            'Resume a paused sandbox under the same id, from the files it kept (waits until it is ready unless ?wait=false)',
          params: IdParams,
          querystring: CreateSandboxQuery,
          response: { 200: SandboxResponse, 202: SandboxResponse, ...problems, ...problemResponses(504) },
        },
      },
      async (request, reply) => {
        const wait = request.query.wait !== false;
        const sandbox = await owned(request.params.id).resume({
          wait,
          timeoutSeconds: request.query.timeoutSeconds ?? DEFAULT_READY_SECONDS,
        });
        return reply.code(wait ? 200 : 202).send(withUserId(sandbox));
      },
    );

    app.post(
      '/:id/connect',
      {
        schema: {
          tags,
          summary:
            'Wait until a sandbox takes commands (woken by its ready event, not by polling), then keep it from idling',
          params: IdParams,
          querystring: ConnectSandboxQuery,
          response: { 204: z.null(), ...problems, ...problemResponses(504) },
        },
      },
      async (request, reply) => {
        // A caller that goes away ends the wait (and frees its blocking reader) at once.
        const gone = new AbortController();
        let finished = false;
        reply.raw.once('close', () => {
          if (!finished) gone.abort(new Error('the caller went away'));
        });
        try {
          await sandboxes.connect(request.params.id, {
            timeoutSeconds: request.query.timeoutSeconds ?? DEFAULT_READY_SECONDS,
            signal: gone.signal,
          });
        } finally {
          finished = true;
        }
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/:id/keepalive',
      {
        schema: {
          tags,
          summary: 'Keep it from idling (its idle expiry starts again)',
          params: IdParams,
          response: { 204: z.null(), ...problems },
        },
      },
      async (request, reply) => {
        await owned(request.params.id).keepAlive();
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/:id/timeout',
      {
        schema: {
          tags,
          summary:
            "Set when it ends: timeoutSeconds after this request (sooner or later than before), capped at the operator's maximum lifetime",
          params: IdParams,
          body: SandboxSetTimeoutSchema,
          response: {
            200: z.object({ endsAt: z.number(), capped: z.boolean() }).meta({ id: 'SandboxEndsAt' }),
            ...problems,
          },
        },
      },
      async (request) => owned(request.params.id).setTimeout(request.body.timeoutSeconds),
    );

    app.post(
      '/:id/exec',
      {
        // The push script refuses another tenant's sandbox as a missing one: one round trip less.
        config: { checkedByCommand: true },
        schema: {
          tags,
          summary: 'Run a command: JSON result, or text/event-stream of its output then its result',
          params: IdParams,
          body: ExecBody,
          response: {
            200: {
              description: 'the command result; with Accept: text/event-stream, its events as they come',
              content: {
                'application/json': { schema: ExecResultResponse },
                'text/event-stream': { schema: CommandEventSchema },
              },
            },
            ...problems,
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        // An event stream answers 200 before the command is pushed: check first, so that another
        // tenant's sandbox is a 404 there too (the JSON answer gets it from the push script).
        if (wantsEventStream(request)) await checkAccess(ctx, principal, request.params.id, 'sandbox');
        const sandbox = sandboxes.handle(
          request.params.id,
          principal.admin ? {} : { tenant: principal.tenant },
        );
        return execForRequest(sandbox, request.body, request, reply);
      },
    );

    app.post(
      '/:id/code',
      {
        config: { checkedByCommand: true },
        schema: {
          tags,
          summary:
            'Run a cell in a code interpreter context (Python, JavaScript, bash): JSON Execution, or text/event-stream of its output, results, then the execution',
          params: IdParams,
          body: CodeBody,
          response: {
            200: {
              description: 'the execution; with Accept: text/event-stream, its events as they come',
              content: {
                'application/json': { schema: ExecutionSchema },
                'text/event-stream': { schema: CodeEventSchema },
              },
            },
            ...problems,
            ...problemResponses(400, 422),
          },
        },
      },
      async (request, reply) => {
        const principal = principalOf(request);
        if (wantsEventStream(request)) await checkAccess(ctx, principal, request.params.id, 'sandbox');
        const sandbox = sandboxes.handle(
          request.params.id,
          principal.admin ? {} : { tenant: principal.tenant },
        );
        return runCodeForRequest(sandbox, request.body, request, reply);
      },
    );

    app.delete(
      '/:id/exec/:execId',
      {
        schema: {
          tags,
          summary: 'Cancel a running command (its whole process tree is killed)',
          params: ExecIdParams,
          response: {
            202: z.object({ commandId: z.string(), status: z.literal('cancel-requested') }),
            ...problems,
          },
        },
      },
      async (request, reply) => {
        const sandbox = owned(request.params.id);
        await sandbox.cancel(request.params.execId);
        return reply
          .code(202)
          .send({ commandId: request.params.execId, status: 'cancel-requested' as const });
      },
    );

    app.get(
      '/:id/history',
      {
        schema: {
          tags,
          summary: 'The commands still in its bounded history, with their results',
          params: IdParams,
          response: { 200: z.array(HistoryEntryResponse), ...problems },
        },
      },
      async (request) => owned(request.params.id).history(),
    );

    app.get(
      '/:id/stats',
      {
        schema: {
          tags,
          summary: 'CPU, memory, workspace size and command counts',
          params: IdParams,
          response: { 200: StatsResponse, ...problems },
        },
      },
      async (request) => owned(request.params.id).stats(),
    );

    app.get(
      '/:id/events',
      {
        schema: {
          tags,
          summary: "SSE of the sandbox's state changes and command output (resumable: Last-Event-ID)",
          params: IdParams,
          querystring: EventsQuery,
          response: {
            200: eventStreamResponse("the sandbox's timeline as server-sent events", TimelineEventSchema),
            ...problems,
          },
        },
      },
      async (request, reply) => streamTimeline(ctx.client, request.params.id, request.query, request, reply),
    );
  };
}
