import { PassThrough, type Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireAccess } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { HttpProblem } from '../problem.js';
import {
  ArchiveQuery,
  GrepQuery,
  GrepResponse,
  IdParams,
  LsQuery,
  LsResponse,
  PathQuery,
  WatchBody,
  WriteFileQuery,
} from '../schemas.js';
import { CommandEventSchema, eventStreamResponse } from '../sse-schemas.js';
import { watchForRequest } from '../watch-directory.js';
import { sendText, writeFileBody } from './file-bodies.js';

const problems = problemResponses(404, 409, 413);

/** Files of a sandbox's workspace: read, write, list, search, and tar streams in and out. */
export function sandboxFileRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    const tags = ['sandbox files'];
    requireAccess(app, 'sandbox');
    // The route's id was checked before the handler (requireAccess).
    const files = (id: string) => ctx.client.sandboxes.handle(id).files;

    app.get(
      '/:id/fs',
      {
        schema: {
          tags,
          summary: 'Read a text file (UTF-8, up to the read limit; use /archive for anything larger)',
          params: IdParams,
          querystring: PathQuery,
          response: {
            200: { description: 'the file, UTF-8', content: { 'text/plain': { schema: z.string() } } },
            ...problems,
            ...problemResponses(422),
          },
        },
      },
      async (request, reply) => {
        return sendText(reply, await files(request.params.id).read(request.query.path));
      },
    );

    app.put(
      '/:id/fs',
      {
        schema: {
          tags,
          summary:
            'Write a file atomically (the body is its content: text/plain or application/octet-stream)',
          params: IdParams,
          querystring: WriteFileQuery,
          consumes: ['application/octet-stream', 'text/plain'],
          response: { 200: z.object({ path: z.string(), bytesWritten: z.number() }), ...problems },
        },
      },
      async (request) => writeFileBody(files(request.params.id), request.query, request.body),
    );

    app.post(
      '/:id/watch',
      {
        schema: {
          tags,
          summary:
            "Watch a directory: an event stream of the watch's command (`started`, one `stdout` line of JSON per change, its `result` at the end); closing the stream stops it",
          params: IdParams,
          body: WatchBody,
          response: {
            200: eventStreamResponse(
              'the watch, as a command: its id, each change, its end',
              CommandEventSchema,
            ),
            ...problems,
            ...problemResponses(422),
          },
        },
      },
      async (request, reply) => watchForRequest(files(request.params.id), request.body, request, reply),
    );

    app.get(
      '/:id/ls',
      {
        schema: {
          tags,
          summary: 'List a directory',
          params: IdParams,
          querystring: LsQuery,
          response: { 200: LsResponse, ...problems },
        },
      },
      async (request) => {
        const { path, maxDepth, maxEntries } = request.query;
        return files(request.params.id).list(path, {
          ...(maxDepth !== undefined ? { maxDepth } : {}),
          ...(maxEntries !== undefined ? { maxEntries } : {}),
        });
      },
    );

    app.get(
      '/:id/grep',
      {
        schema: {
          tags,
          summary: 'Search file contents',
          params: IdParams,
          querystring: GrepQuery,
          response: { 200: GrepResponse, ...problems },
        },
      },
      async (request) => {
        const { pattern, ...options } = request.query;
        const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
        return files(request.params.id).grep(pattern, defined);
      },
    );

    app.post(
      '/:id/archive',
      {
        schema: {
          tags,
          summary: 'Upload a tar stream, unpacked into the directory ?path= (created when missing)',
          params: IdParams,
          querystring: ArchiveQuery,
          consumes: ['application/x-tar'],
          response: { 200: z.object({ bytes: z.number(), files: z.number() }), ...problems },
        },
      },
      async (request) => {
        const tar = request.body as Readable;
        if (typeof (tar as { pipe?: unknown })?.pipe !== 'function') {
          throw new HttpProblem(415, 'unsupported-media-type', 'the body must be application/x-tar');
        }
        const sandboxFiles = files(request.params.id);
        // Through a pipe of its own: an upload refused midway (over its maxBytes) destroys what it
        // reads, and had that been the request, the socket went with it and the client, still
        // sending, saw a reset instead of the answer (seen in CI). The rest is read and dropped.
        const body = new PassThrough();
        tar.pipe(body);
        try {
          return await sandboxFiles.upload(body, request.query.path, {
            ...(request.query.maxBytes !== undefined ? { maxBytes: request.query.maxBytes } : {}),
          });
        } catch (err) {
          tar.unpipe(body);
          tar.resume();
          throw err;
        }
      },
    );

    app.get(
      '/:id/archive',
      {
        schema: {
          tags,
          summary: 'Download a file or directory as a tar stream',
          params: IdParams,
          querystring: ArchiveQuery,
          response: {
            200: {
              description: 'a tar stream of the file or directory',
              content: { 'application/x-tar': { schema: z.string().describe('tar bytes') } },
            },
            ...problems,
          },
        },
      },
      async (request, reply) => {
        const sandboxFiles = files(request.params.id);
        const tar = sandboxFiles.download(request.query.path, {
          ...(request.query.maxBytes !== undefined ? { maxBytes: request.query.maxBytes } : {}),
        });
        // Errors before the first byte (no such path) become a problem; later ones cut the stream.
        const first = await new Promise<Buffer | null>((resolve, reject) => {
          tar.once('readable', () => resolve(tar.read() as Buffer | null));
          tar.once('error', reject);
        });
        if (first !== null) tar.unshift(first);
        // Streamed as it comes, past the serializer (the 200 schema only documents the type).
        return (reply as FastifyReply).type('application/x-tar').send(tar);
      },
    );
  };
}
