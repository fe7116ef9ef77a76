import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { ApiContext } from '../api-context.js';
import type { Filesystem } from '../gen/filesystem/filesystem_pb.js';
import { HttpProblem } from '../problem.js';
import { requestOf } from './e2b-connect.js';
import { parseMessage, unsupported } from './e2b-errors.js';
import { listedEntry, makeDir, move, remove, statEntry } from './e2b-file-ops.js';
import { MoveRequestSchema, PathRequestSchema } from './e2b-filesystem-schemas.js';
import { headerSandbox } from './e2b-sandbox.js';
import { watchDir } from './e2b-watch-dir.js';

const FilesQuery = z.object({ path: z.string().min(1).optional(), username: z.string().optional() });

/** The files of a write: one body (octet-stream, `?path=`), or multipart parts named by their filename. */
async function uploadedFiles(
  contentType: string,
  body: unknown,
  path: string | undefined,
): Promise<{ path: string; bytes: Uint8Array }[]> {
  if (!Buffer.isBuffer(body))
    throw new HttpProblem(
      400,
      'invalid-request',
      'the body must be multipart/form-data or application/octet-stream',
    );
  if (contentType.startsWith('application/octet-stream')) {
    if (path === undefined)
      throw new HttpProblem(400, 'invalid-request', 'path: required with an octet-stream body');
    return [{ path, bytes: body }];
  }
  const form = await new Response(body, { headers: { 'content-type': contentType } }).formData();
  const files: { path: string; bytes: Uint8Array }[] = [];
  for (const value of form.getAll('file')) {
    if (typeof value === 'string') continue;
    const name = path ?? value.name;
    files.push({ path: name, bytes: new Uint8Array(await value.arrayBuffer()) });
  }
  if (files.length === 0) throw new HttpProblem(400, 'invalid-request', 'file: the form has no file part');
  return files;
}

/**
 * E2B's `filesystem.Filesystem` service (generated from proto/filesystem/filesystem.proto,
 * served by connect-fastify's plugin) on our sandbox files: list is our list step, stat / mkdir /
 * remove / move small commands (e2b-file-ops.ts), WatchDir our watch step (e2b-watch-dir.ts).
 * The polled watchers answer unimplemented, naming the call.
 */
export function filesystemService(ctx: ApiContext): ServiceImpl<typeof Filesystem> {
  const sandboxOf = (context: HandlerContext) => headerSandbox(ctx, requestOf(context));
  const polled = (call: string) => async () => {
    throw unsupported(`filesystem.Filesystem/${call} (polled watchers; WatchDir is served)`);
  };
  return {
    async stat(request, context) {
      const { path } = parseMessage(PathRequestSchema, request, 'filesystem.Filesystem/Stat');
      return { entry: await statEntry(await sandboxOf(context), path) };
    },

    async listDir(request, context) {
      const { path } = parseMessage(PathRequestSchema, request, 'filesystem.Filesystem/ListDir');
      const sandbox = await sandboxOf(context);
      // proto3 cannot tell a depth left out from 0: either is the directory's own entries.
      const listed = await sandbox.files.list(path, { maxDepth: Math.max(1, request.depth) });
      return { entries: listed.entries.map((e) => listedEntry(path, e)) };
    },

    async makeDir(request, context) {
      const { path } = parseMessage(PathRequestSchema, request, 'filesystem.Filesystem/MakeDir');
      return { entry: await makeDir(await sandboxOf(context), path) };
    },

    async remove(request, context) {
      const { path } = parseMessage(PathRequestSchema, request, 'filesystem.Filesystem/Remove');
      await remove(await sandboxOf(context), path);
      return {};
    },

    async move(request, context) {
      const { source, destination } = parseMessage(MoveRequestSchema, request, 'filesystem.Filesystem/Move');
      return { entry: await move(await sandboxOf(context), source, destination) };
    },

    async *watchDir(request, context) {
      parseMessage(PathRequestSchema, request, 'filesystem.Filesystem/WatchDir');
      yield* await watchDir(context, await sandboxOf(context), request);
    },

    // The polling form of a watch (other SDKs'); the JS SDK's watchDir is the stream above.
    createWatcher: polled('CreateWatcher'),
    getWatcherEvents: polled('GetWatcherEvents'),
    removeWatcher: polled('RemoveWatcher'),
  };
}

/**
 * envd's HTTP `/files` and `/health` (plain routes, not Connect): read and write go through the
 * SDK's files, as the HTTP API's do.
 */
export function e2bFileRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (_req, body, done) =>
      done(null, body),
    );

    app.get('/health', async (request, reply) => {
      const sandbox = await headerSandbox(ctx, request).catch(() => undefined);
      const record = sandbox ? await sandbox.info().catch(() => undefined) : undefined;
      // 502 is what E2B's edge answers for a sandbox that is not running: isRunning() false.
      return reply.code(record?.state === 'ready' ? 204 : 502).send();
    });

    app.get('/files', async (request, reply) => {
      const { path } = FilesQuery.parse(request.query);
      if (path === undefined) throw new HttpProblem(400, 'invalid-request', 'path: required');
      const sandbox = await headerSandbox(ctx, request);
      const bytes = await sandbox.files.read(path, { format: 'bytes' });
      return reply.type('application/octet-stream').send(Buffer.from(bytes));
    });

    app.post('/files', async (request) => {
      const { path } = FilesQuery.parse(request.query);
      // File metadata (envd 0.6.2's X-Metadata-* headers) is not kept: refused, not dropped.
      if (Object.keys(request.headers).some((h) => h.startsWith('x-metadata-')))
        throw unsupported('files.write with metadata');
      const sandbox = await headerSandbox(ctx, request);
      const files = await uploadedFiles(String(request.headers['content-type'] ?? ''), request.body, path);
      for (const file of files) await sandbox.files.write(file.path, file.bytes);
      return files.map((f) => ({ name: f.path.split('/').pop() ?? f.path, type: 'file', path: f.path }));
    });
  };
}
