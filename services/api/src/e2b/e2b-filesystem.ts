import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { ApiContext } from '../api-context.js';
import { HttpProblem } from '../problem.js';
import { requestMessage } from './e2b-connect-stream.js';
import { connectErrors, parseMessage, unsupported } from './e2b-errors.js';
import { listedEntry, makeDir, move, remove, statEntry } from './e2b-file-ops.js';
import {
  ListDirRequestSchema,
  MoveRequestSchema,
  PathRequestSchema,
  WatchDirRequestSchema,
} from './e2b-filesystem-schemas.js';
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
 * E2B's `filesystem.Filesystem` service (Connect, JSON) and envd's HTTP `/files` and `/health`,
 * on our sandbox files: read and write go through the SDK's files (as the HTTP API's do), list
 * is our list step, stat / mkdir / remove / move small commands (e2b-file-ops.ts), WatchDir our
 * watch step (e2b-watch-dir.ts). The polled watchers answer unimplemented, naming the call.
 */
export function e2bFilesystemRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.setErrorHandler(connectErrors);
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
      const sandbox = await headerSandbox(ctx, request);
      const files = await uploadedFiles(String(request.headers['content-type'] ?? ''), request.body, path);
      for (const file of files) await sandbox.files.write(file.path, file.bytes);
      return files.map((f) => ({ name: f.path.split('/').pop() ?? f.path, type: 'file', path: f.path }));
    });

    app.post('/filesystem.Filesystem/Stat', async (request) => {
      const { path } = parseMessage(PathRequestSchema, request.body, 'filesystem.Filesystem/Stat');
      return { entry: await statEntry(await headerSandbox(ctx, request), path) };
    });

    app.post('/filesystem.Filesystem/ListDir', async (request) => {
      const { path, depth } = parseMessage(
        ListDirRequestSchema,
        request.body,
        'filesystem.Filesystem/ListDir',
      );
      const sandbox = await headerSandbox(ctx, request);
      const listed = await sandbox.files.list(path, { maxDepth: depth });
      return { entries: listed.entries.map((e) => listedEntry(path, e)) };
    });

    app.post('/filesystem.Filesystem/MakeDir', async (request) => {
      const { path } = parseMessage(PathRequestSchema, request.body, 'filesystem.Filesystem/MakeDir');
      return { entry: await makeDir(await headerSandbox(ctx, request), path) };
    });

    app.post('/filesystem.Filesystem/Remove', async (request) => {
      const { path } = parseMessage(PathRequestSchema, request.body, 'filesystem.Filesystem/Remove');
      await remove(await headerSandbox(ctx, request), path);
      return {};
    });

    app.post('/filesystem.Filesystem/Move', async (request) => {
      const { source, destination } = parseMessage(
        MoveRequestSchema,
        request.body,
        'filesystem.Filesystem/Move',
      );
      return { entry: await move(await headerSandbox(ctx, request), source, destination) };
    });

    app.post('/filesystem.Filesystem/WatchDir', async (request, reply) => {
      const watch = parseMessage(
        WatchDirRequestSchema,
        requestMessage(request.body),
        'filesystem.Filesystem/WatchDir',
      );
      await watchDir(request, reply, await headerSandbox(ctx, request), watch);
      return reply;
    });

    // The polling form of a watch (other SDKs'); the JS SDK's watchDir is the stream above.
    for (const call of ['CreateWatcher', 'GetWatcherEvents', 'RemoveWatcher'] as const) {
      app.post(`/filesystem.Filesystem/${call}`, async () => {
        throw unsupported(`filesystem.Filesystem/${call} (polled watchers; WatchDir is served)`);
      });
    }
  };
}
