import { JobSpecSchema, type JobState, userJobId } from '@sandstream/bus';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { streamTimeline } from '../job-events.js';
import { listScope, markEventsCursor, sendPage } from '../list-page.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { notFound } from '../problem.js';
import { EventsQuery, IdParams, JobResponse, ListJobsQuery, SubmitResponse } from '../schemas.js';
import { applySpecDefaults } from '../spec-defaults.js';
import { eventStreamResponse, TimelineEventSchema } from '../sse-schemas.js';
import { withUserId } from '../tenant-scope.js';

const problems = problemResponses(403, 404);

const newestFirst = (a: { createdAt: number }, b: { createdAt: number }) => b.createdAt - a.createdAt;

/** Jobs: submit (JSON, or the YAML job file), list, get, cancel, follow. */
export function jobRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    const tags = ['jobs'];

    app.post(
      '',
      {
        preValidation: applySpecDefaults(ctx),
        schema: {
          tags,
          summary: 'Submit a job (application/json, or the YAML job file as application/yaml)',
          consumes: ['application/json', 'application/yaml'],
          body: JobSpecSchema,
          response: { 201: SubmitResponse, 200: SubmitResponse, ...problems },
        },
      },
      async (request, reply) => {
        const result = await ctx.client.submit(request.body);
        return reply
          .code(result.created ? 201 : 200)
          .send({ jobId: userJobId(result.jobId), created: result.created });
      },
    );

    app.get(
      '',
      {
        schema: {
          tags,
          summary: 'List jobs, newest first',
          querystring: ListJobsQuery,
          response: { 200: z.array(JobResponse), ...problems },
        },
      },
      async (request, reply) => {
        const scope = listScope(principalOf(request), request.query.tenant);
        if (!scope) return [];
        const { tenant } = scope;
        await markEventsCursor(ctx, reply);
        const states: (JobState | undefined)[] = request.query.state ?? [undefined];
        return sendPage(reply, request.query, async (limit) => {
          // One read per state asked (the store indexes by state), merged newest first.
          const pages = await Promise.all(
            states.map((state) =>
              ctx.client.list({
                ...(tenant ? { tenant } : {}),
                ...(state ? { state } : {}),
                ...(!tenant && !state ? { tenant: 'default' } : {}),
                limit,
              }),
            ),
          );
          const found = states.length === 1 ? (pages[0] ?? []) : pages.flat().sort(newestFirst);
          return found.slice(0, limit).map(withUserId);
        });
      },
    );

    app.get(
      '/:id',
      {
        config: { prefetch: 'job' },
        schema: {
          tags,
          summary: "A job's record: state, step results, timestamps",
          params: IdParams,
          response: { 200: JobResponse, ...problems },
        },
      },
      async (request) => {
        const record = await (request.prefetched ?? ctx.client.get(request.params.id));
        const principal = principalOf(request);
        if (!record || (!principal.admin && record.tenant !== principal.tenant))
          throw notFound(`job ${request.params.id}`);
        return withUserId(record);
      },
    );

    app.delete(
      '/:id',
      {
        config: { access: 'any' },
        schema: {
          tags,
          summary: 'Cancel a job (a running step is killed)',
          params: IdParams,
          response: { 202: z.object({ status: z.string(), state: z.string().optional() }), ...problems },
        },
      },
      async (request, reply) => {
        const result = await ctx.client.cancel(request.params.id);
        if (result.status === 'missing') throw notFound(`job ${request.params.id}`);
        return reply.code(202).send(result);
      },
    );

    app.get(
      '/:id/events',
      {
        config: { access: 'any' },
        schema: {
          tags,
          summary: 'SSE of output and state changes, resumable with Last-Event-ID (or ?from=)',
          params: IdParams,
          querystring: EventsQuery,
          response: {
            200: eventStreamResponse("the job's timeline as server-sent events", TimelineEventSchema),
            ...problems,
          },
        },
      },
      async (request, reply) => {
        return streamTimeline(ctx.client, request.params.id, request.query, request, reply);
      },
    );
  };
}
