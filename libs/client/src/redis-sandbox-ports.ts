import {
  PREVIEW_TOKEN_SECONDS,
  previewSecret,
  registerPreview,
  sandboxRecordOf,
  signPreviewToken,
} from '@sandstream/bus';
import { SandstreamOptionsError } from './client-options.js';
import type { RedisSandboxContext } from './redis-sandbox-context.js';
import { SandboxNotFoundError } from './sandbox-errors.js';
import { composePreviewUrl, type PortUrlRequest, requireReachable } from './sandbox-ports.js';

/**
 * A preview URL made over Redis, as services/api makes it (routes/sandbox-ports.ts): the label
 * and public port recorded, the token signed with the installation's secret. The URL points at
 * the API (`previewUrl`), which proxies it.
 */
export async function redisPortUrl(
  ctx: RedisSandboxContext,
  id: string,
  port: number,
  options: PortUrlRequest,
): Promise<string> {
  const apiBase = ctx.preview.apiBase;
  if (!apiBase)
    throw new SandstreamOptionsError(
      'previewUrl: a preview URL points at the HTTP API, which proxies it; set the client option previewUrl (or SANDSTREAM_API_URL) to the API as its users reach it',
    );
  const job = await ctx.store.get(id);
  const record = job ? sandboxRecordOf(job) : null;
  if (!record || (ctx.tenant !== undefined && record.tenant !== ctx.tenant))
    throw new SandboxNotFoundError(id);
  requireReachable(record);
  const label = await registerPreview(ctx.redis, ctx.keys, {
    tenant: record.tenant,
    sandboxId: id,
    port,
    public: options.public,
  });
  const token = options.public
    ? undefined
    : signPreviewToken(await previewSecret(ctx.redis, ctx.keys), {
        s: id,
        p: port,
        e: Math.floor(Date.now() / 1000) + PREVIEW_TOKEN_SECONDS,
      });
  return composePreviewUrl({
    apiBase,
    domain: ctx.preview.domain,
    sandboxId: id,
    label,
    port,
    form: options.form,
    token,
  });
}
