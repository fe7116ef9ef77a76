import { userJobId, VolumeCreateSchema, VolumeNameSchema } from '@sandstream/bus';
import { Limits, strictObject } from '@sandstream/wire';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { HttpProblem } from '../problem.js';
import { LsResponse, queryBool, queryInt, WriteFileQuery } from '../schemas.js';
import { sendText, writeFileBody } from './file-bodies.js';

const VolumeParams = strictObject({ name: VolumeNameSchema });
const Holder = z.object({ sandboxId: z.string(), readOnly: z.boolean() });
const VolumeResponse = z.object({
  name: z.string(),
  tenant: z.string(),
  uid: z.string(),
  sizeLimitBytes: z.number().optional(),
  createdAt: z.string(),
  holders: z.array(Holder).describe('sandboxes mounting it now'),
});
const FilesQuery = strictObject({
  path: z.string().min(1).max(4096).default('.'),
  /** `true`: list the directory at `path` (JSON) instead of reading the file. */
  list: queryBool.optional(),
  maxDepth: queryInt(1, Limits.listFilesMaxDepth).optional(),
  maxEntries: queryInt(1, Limits.listFilesMaxEntries).optional(),
});

/** A volume as answered: the record and its holders, nothing else of the store's. */
const shown = (v: z.input<typeof VolumeResponse>) => ({
  name: v.name,
  tenant: v.tenant,
  uid: v.uid,
  ...(v.sizeLimitBytes !== undefined ? { sizeLimitBytes: v.sizeLimitBytes } : {}),
  createdAt: v.createdAt,
  holders: v.holders.map((h) => ({ sandboxId: userJobId(h.sandboxId), readOnly: h.readOnly })),
});

/**
 * The caller's tenant's volumes (docs/volumes.md): create, list, get, delete, and their files.
 * Scoped by the key's tenant alone: another tenant's volume is not found (the store is keyed by
 * tenant, so there is nothing to check first).
 */
export function volumeRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    const tags = ['volumes'];
    const volumes = (request: Parameters<typeof principalOf>[0]) =>
      ctx.client.volumes.forTenant(principalOf(request).tenant);

    app.post(
      '/',
      {
        schema: {
          tags,
          summary: "Create a volume (idempotent by name; over the tenant's quota: 429 sandbox-limit)",
          body: VolumeCreateSchema,
          response: { 200: VolumeResponse, 201: VolumeResponse, ...problemResponses(400, 429) },
        },
      },
      async (request, reply) => {
        const before = await volumes(request).get(request.body.name);
        const volume = await volumes(request).create(request.body);
        return reply.code(before ? 200 : 201).send(shown(volume));
      },
    );

    app.get(
      '/',
      {
        schema: {
          tags,
          summary: 'List volumes',
          response: { 200: z.object({ volumes: z.array(VolumeResponse) }) },
        },
      },
      async (request) => ({ volumes: (await volumes(request).list()).map(shown) }),
    );

    app.get(
      '/:name',
      {
        schema: {
          tags,
          summary: 'Get a volume',
          params: VolumeParams,
          response: { 200: VolumeResponse, ...problemResponses(404) },
        },
      },
      async (request) => {
        const volume = await volumes(request).get(request.params.name);
        if (!volume)
          throw new HttpProblem(404, 'volume-not-found', `volume ${request.params.name} not found`);
        return shown(volume);
      },
    );

    app.delete(
      '/:name',
      {
        schema: {
          tags,
          summary: 'Delete a volume (refused while a sandbox mounts it: 409 volume-in-use)',
          params: VolumeParams,
          response: { 204: z.null().describe('deleted'), ...problemResponses(404, 409) },
        },
      },
      async (request, reply) => {
        await volumes(request).delete(request.params.name);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/:name/files',
      {
        schema: {
          tags,
          summary: 'Read a file of a volume (UTF-8), or with list=true list a directory (JSON)',
          params: VolumeParams,
          querystring: FilesQuery,
          response: {
            200: {
              description: 'the file (text/plain), or the listing (application/json)',
              content: {
                'text/plain': { schema: z.string() },
                'application/json': { schema: LsResponse },
              },
            },
            ...problemResponses(400, 404, 409, 413, 422),
          },
        },
      },
      async (request, reply) => {
        const files = volumes(request).files(request.params.name);
        const { path, list, maxDepth, maxEntries } = request.query;
        if (list) {
          return reply.type('application/json').send(
            await files.list(path, {
              ...(maxDepth !== undefined ? { maxDepth } : {}),
              ...(maxEntries !== undefined ? { maxEntries } : {}),
            }),
          );
        }
        return sendText(reply, await files.read(path));
      },
    );

    app.put(
      '/:name/files',
      {
        schema: {
          tags,
          summary:
            'Write a file of a volume atomically (the body is its content); refused while another sandbox writes to it',
          params: VolumeParams,
          querystring: WriteFileQuery,
          consumes: ['application/octet-stream', 'text/plain'],
          response: {
            200: z.object({ path: z.string(), bytesWritten: z.number() }),
            ...problemResponses(400, 404, 409, 413),
          },
        },
      },
      async (request) =>
        writeFileBody(volumes(request).files(request.params.name), request.query, request.body),
    );
  };
}
