import type { FastifyPluginAsync } from 'fastify';
import type { ApiContext } from '../api-context.js';
import type { PreviewConfig } from '../preview-config.js';
import { e2bControlPlaneRoutes } from './e2b-control-plane.js';
import { e2bFilesystemRoutes } from './e2b-filesystem.js';
import { e2bProcessRoutes } from './e2b-process.js';

/**
 * The E2B-compatible API (docs: README "Coming from E2B"): with E2B_API_URL and
 * E2B_SANDBOX_URL both this server's URL and a Sandstream key as E2B_API_KEY, the unmodified
 * `e2b` SDK drives our sandboxes. Its paths do not meet ours (/v1, /api): the control plane's
 * are /v2/sandboxes and /sandboxes/…, the in-sandbox ones /process.Process/…,
 * /filesystem.Filesystem/…, /files and /health, routed by the E2b-Sandbox-Id header.
 */
export function e2bRoutes(ctx: ApiContext, preview: PreviewConfig): FastifyPluginAsync {
  return async (app) => {
    // Not part of our OpenAPI document: E2B's SDK is their client.
    app.addHook('onRoute', (route) => {
      route.schema = { ...route.schema, hide: true };
    });
    // Server streams' requests are one Connect envelope (connect-envelope.ts), read whole.
    app.addContentTypeParser('application/connect+json', { parseAs: 'buffer' }, (_req, body, done) =>
      done(null, body),
    );
    await app.register(e2bControlPlaneRoutes(ctx, preview));
    await app.register(e2bProcessRoutes(ctx));
    await app.register(e2bFilesystemRoutes(ctx));
  };
}
