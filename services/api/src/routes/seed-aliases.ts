import { strictObject } from '@sandstream/wire';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireAccess } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { IdParams, LsResponse } from '../schemas.js';
import { sandboxRoutes } from './sandboxes.js';

const tags = ['seed 003 aliases'];
const problems = problemResponses(404, 409, 413);

/**
 * Seed 003's paths sees a sandbox's filesystem as rooted at `/`: here that root is the sandbox's
 * workspace, so `/hello.txt` is the workspace's `hello.txt` (what a command in it sees as
 * `./hello.txt`), and nothing of the seed's API reaches outside the workspace by accident.
 */
export function seedPath(path: string): string {
  const relative = path.replace(/^\/+/, '');
  return relative === '' ? '.' : relative;
}

const SeedWriteBody = strictObject({
  path: z.string().min(1).max(4096),
  content: z.string(),
});

/**
 * Seed 003's REST paths (`/api/sandbox…`) with exactly its bodies: the sandbox routes as they
 * are (create `{"id": …}`, exec `{"command": "echo Hello World"}`, history, stats, delete), and
 * the file routes in its JSON shape (`PUT /fs {path, content}`, `GET /fs?path=` → `{path, content}`).
 */
export function seedAliasRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    await app.register(sandboxRoutes(ctx, tags));
    requireAccess(app, 'sandbox');
    // The route's id was checked before the handler (requireAccess).
    const files = (id: string) => ctx.client.sandboxes.handle(id).files;

    app.get(
      '/:id/fs',
      {
        schema: {
          tags,
          summary: 'Read a file: {path, content}',
          params: IdParams,
          querystring: strictObject({ path: z.string().min(1).max(4096) }),
          response: {
            200: z.object({ path: z.string(), content: z.string() }),
            ...problems,
            ...problemResponses(422),
          },
        },
      },
      async (request) => {
        const content = await files(request.params.id).read(seedPath(request.query.path));
        return { path: request.query.path, content };
      },
    );

    app.put(
      '/:id/fs',
      {
        schema: {
          tags,
          summary: 'Write a file: {path, content}',
          params: IdParams,
          body: SeedWriteBody,
          response: { 200: z.object({ path: z.string(), bytesWritten: z.number() }), ...problems },
        },
      },
      async (request) => {
        const { path, content } = request.body;
        const bytesWritten = await files(request.params.id).write(seedPath(path), content);
        return { path, bytesWritten };
      },
    );

    app.get(
      '/:id/ls',
      {
        schema: {
          tags,
          summary: 'List a directory',
          params: IdParams,
          querystring: strictObject({ path: z.string().min(1).max(4096).default('/') }),
          response: { 200: LsResponse, ...problems },
        },
      },
      async (request) => files(request.params.id).list(seedPath(request.query.path)),
    );
  };
}
