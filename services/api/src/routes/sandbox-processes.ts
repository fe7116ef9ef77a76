import { SandboxCommandNotFoundError } from '@sandstream/client';
import { Limits } from '@sandstream/wire';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireAccess } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { commandOf, sendExecution } from '../exec-command.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { HttpProblem } from '../problem.js';
import { HistoryEntryResponse, IdParams, KillProcessQuery, PidParams, StartProcessBody } from '../schemas.js';
import { followerStream } from '../sse.js';
import { CommandEventSchema, eventStreamResponse } from '../sse-schemas.js';

const problems = problemResponses(404, 409);

/** Background processes of a sandbox: start, list, kill, and follow one's output as SSE. */
export function sandboxProcessRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    const tags = ['sandbox processes'];
    requireAccess(app, 'sandbox');
    const processes = async (_request: unknown, id: string) => ctx.client.sandboxes.handle(id).processes;

    app.post(
      '/:id/processes',
      {
        schema: {
          tags,
          summary: 'Start a background process (answers at once with its id)',
          params: IdParams,
          body: StartProcessBody,
          response: { 201: z.object({ id: z.string() }), ...problems },
        },
      },
      async (request, reply) => {
        const { command, args, ...options } = request.body;
        const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
        const started = await (await processes(request, request.params.id)).start(
          commandOf({ command, args }),
          defined,
        );
        return reply.code(201).send({ id: started.id });
      },
    );

    app.get(
      '/:id/processes',
      {
        schema: {
          tags,
          summary: 'The background processes still running',
          params: IdParams,
          response: { 200: z.array(HistoryEntryResponse), ...problems },
        },
      },
      async (request) => (await processes(request, request.params.id)).list(),
    );

    app.delete(
      '/:id/processes/:pid',
      {
        schema: {
          tags,
          summary:
            "Kill a running process's whole tree (?signal=, default SIGTERM, SIGKILL after a grace); 404 for an unknown or finished one",
          params: PidParams,
          querystring: KillProcessQuery,
          response: {
            202: z.object({ id: z.string(), status: z.literal('kill-requested') }),
            ...problems,
          },
        },
      },
      async (request, reply) => {
        const { id, pid } = request.params;
        const list = await processes(request, id);
        // Only a running process can be killed: an unknown or finished one is 404, not a kill
        // request that would do nothing. (A kill racing the process's own end still answers 202.)
        const entry = (await ctx.client.sandboxes.handle(id).history()).find((c) => c.id === pid);
        if (entry === undefined) throw new SandboxCommandNotFoundError(id, pid);
        if (entry.result !== undefined) {
          throw new SandboxCommandNotFoundError(
            id,
            pid,
            `process ${pid} of sandbox ${id} has already ended (exit code ${entry.result.exitCode})`,
          );
        }
        await list.kill(pid, request.query.signal);
        return reply.code(202).send({ id: request.params.pid, status: 'kill-requested' as const });
      },
    );

    // A command's open stdin (exec with openStdin): what the SDK's writeStdin / closeStdin do
    // over Redis. The body is the bytes as they are; one request at most the size of a command's
    // whole stdin, and the agent's input list bounds how much may wait unread.
    app.post(
      '/:id/processes/:pid/stdin',
      {
        bodyLimit: Limits.runStdinMaxBytes,
        schema: {
          tags,
          summary: `Write to a command's open stdin (started with openStdin): the body's bytes (application/octet-stream or text/plain, at most ${Limits.runStdinMaxBytes} bytes)`,
          params: PidParams,
          consumes: ['application/octet-stream', 'text/plain'],
          response: { 204: z.null().describe('written'), ...problems, ...problemResponses(400, 413, 429) },
        },
      },
      async (request, reply) => {
        const body: unknown = request.body;
        if (typeof body !== 'string' && !Buffer.isBuffer(body)) {
          throw new HttpProblem(
            400,
            'invalid-request',
            'the body must be text/plain or application/octet-stream',
            [{ field: 'body', rule: 'the bytes to write, as text/plain or application/octet-stream' }],
          );
        }
        await ctx.client.sandboxes.handle(request.params.id).writeStdin(request.params.pid, body);
        return reply.code(204).send(null);
      },
    );

    app.delete(
      '/:id/processes/:pid/stdin',
      {
        schema: {
          tags,
          summary: "Close a command's open stdin: it reads end of file",
          params: PidParams,
          response: { 204: z.null().describe('closed'), ...problems },
        },
      },
      async (request, reply) => {
        await ctx.client.sandboxes.handle(request.params.id).closeStdin(request.params.pid);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/:id/processes/:pid/output',
      {
        schema: {
          tags,
          summary: "SSE of a process's output from the start of what is held, then live, then its result",
          params: PidParams,
          response: {
            200: eventStreamResponse("the process's output, then its result", CommandEventSchema),
            ...problems,
          },
        },
      },
      async (request, reply) => {
        const list = await processes(request, request.params.id);
        const sse = followerStream(request, reply);
        try {
          // A follower that goes away stops following; the process goes on (aborting `signal` would kill it).
          const execution = list.follow(request.params.pid, { stopFollowing: sse.signal });
          await sendExecution(sse, execution);
        } catch (err) {
          if (sse.signal.aborted) sse.end();
          else await sse.fail(err);
        }
        return reply;
      },
    );
  };
}
