import {
  PREVIEW_TOKEN_SECONDS,
  previewSecret,
  registerPreview,
  sandboxRecordOf,
  signPreviewToken,
  userJobId,
} from '@sandstream/bus';
import { composePreviewUrl, PortNumberSchema, requireReachable } from '@sandstream/client';
import { strictObject } from '@sandstream/wire';
import type { FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { requireAccess } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { problemResponses } from '../plugins/problem-replies.js';
import type { PreviewConfig } from '../preview-config.js';
import { notFound } from '../problem.js';
import { IdParams } from '../schemas.js';

const PortParams = IdParams.extend({ port: z.coerce.number().pipe(PortNumberSchema) });
const PortUrlQuery = strictObject({
  public: z
    .enum(['true', 'false'])
    .transform((v) => v === 'true')
    .optional(),
  form: z.enum(['path', 'host']).optional(),
});
const PortUrlResponse = z.object({
  url: z.string(),
  /** Epoch ms the token in the URL stops opening it; absent for a public port. */
  expiresAt: z.number().optional(),
});

/** The API's base as the caller reached it: API_PUBLIC_URL, else the request's scheme and Host. */
export function apiBaseOf(request: FastifyRequest, preview: PreviewConfig): string {
  return preview.publicUrl ?? `${request.protocol}://${request.headers.host ?? request.hostname}`;
}

/**
 * A preview URL of port `port` of sandbox `id` (an internal id the caller may see), for the route
 * below and the MCP tool get_preview_url: the sandbox must be ready; a private URL carries a
 * token good for PREVIEW_TOKEN_SECONDS.
 */
export async function previewUrlOf(
  ctx: ApiContext,
  preview: PreviewConfig,
  apiBase: string,
  asked: { id: string; port: number; open: boolean; form: 'path' | 'host' },
): Promise<{ url: string; expiresAt?: number }> {
  const { id, port, open } = asked;
  const job = await ctx.client.get(id);
  const record = job ? sandboxRecordOf(job) : null;
  if (!record) throw notFound(`sandbox ${id}`);
  requireReachable(record);
  const label = await registerPreview(ctx.redis, ctx.keys, {
    tenant: record.tenant,
    sandboxId: id,
    port,
    public: open,
  });
  const expiresAt = Math.floor(Date.now() / 1000) + PREVIEW_TOKEN_SECONDS;
  const token = open
    ? undefined
    : signPreviewToken(await previewSecret(ctx.redis, ctx.keys), { s: id, p: port, e: expiresAt });
  const url = composePreviewUrl({
    apiBase,
    domain: preview.domain,
    // The id as its user knows it (the proxy resolves it by the key or the token); a public
    // URL carries no credential to resolve by, so it names the internal id.
    sandboxId: open ? id : userJobId(id),
    label,
    port,
    form: asked.form,
    token,
  });
  return { url, ...(open ? {} : { expiresAt: expiresAt * 1000 }) };
}

/** GET /v1/sandboxes/{id}/ports/{port}/url: a preview URL of one of a sandbox's ports. */
export function sandboxPortRoutes(ctx: ApiContext, preview: PreviewConfig): FastifyPluginAsyncZod {
  return async (app) => {
    requireAccess(app, 'sandbox');
    app.get(
      '/:id/ports/:port/url',
      {
        schema: {
          tags: ['sandbox ports'],
          summary:
            'A preview URL of a port the sandbox serves on (path form by default, ?form=host; private with its ?token= unless ?public=true)',
          params: PortParams,
          querystring: PortUrlQuery,
          response: { 200: PortUrlResponse, ...problemResponses(404, 409) },
        },
      },
      async (request) =>
        previewUrlOf(ctx, preview, apiBaseOf(request, preview), {
          id: request.params.id,
          port: request.params.port,
          open: request.query.public === true,
          form: request.query.form ?? 'path',
        }),
    );
  };
}
