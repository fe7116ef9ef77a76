import { fastifyConnectPlugin } from '@connectrpc/connect-fastify';
import type { FastifyPluginAsync } from 'fastify';
import type { ApiContext } from '../api-context.js';
import { Filesystem } from '../gen/filesystem/filesystem_pb.js';
import { Process } from '../gen/process/process_pb.js';
import type { PreviewConfig } from '../preview-config.js';
import { connectErrorsInterceptor, contextValuesOf } from './e2b-connect.js';
import { e2bControlPlaneRoutes } from './e2b-control-plane.js';
import { connectErrors } from './e2b-errors.js';
import { e2bFileRoutes, filesystemService } from './e2b-filesystem.js';
import { processService } from './e2b-process.js';

/**
 * The E2B-compatible API (docs: README "Coming from E2B"): with E2B_API_URL and
 * E2B_SANDBOX_URL both this server's URL and a Sandstream key as E2B_API_KEY, the unmodified
 * `e2b` SDK drives our sandboxes. Its paths do not meet ours (/v1, /api): the control plane's
 * are /v2/sandboxes and /sandboxes/…, the in-sandbox ones /process.Process/…,
 * /filesystem.Filesystem/… (Connect services, generated from proto/ and served by
 * connect-fastify's plugin), /files and /health, routed by the E2b-Sandbox-Id header.
 */
export function e2bRoutes(ctx: ApiContext, preview: PreviewConfig): FastifyPluginAsync {
  return async (app) => {
    // Not part of our OpenAPI document: E2B's SDK is their client.
    app.addHook('onRoute', (route) => {
      route.schema = { ...route.schema, hide: true };
    });
    await app.register(e2bControlPlaneRoutes(ctx, preview));
    await app.register(async (inSandbox) => {
      inSandbox.setErrorHandler(connectErrors);
      await inSandbox.register(e2bFileRoutes(ctx));
      await inSandbox.register(async (connect) => {
        // The plugin reads Connect's bodies itself (it adds its own parser for each of its content
        // types, JSON's among them), which Fastify allows only once our JSON parser is gone here.
        connect.removeContentTypeParser('application/json');
        await connect.register(fastifyConnectPlugin, {
          routes: (router) => {
            router.service(Process, processService(ctx));
            router.service(Filesystem, filesystemService(ctx));
          },
          interceptors: [connectErrorsInterceptor],
          contextValues: contextValuesOf,
          // The SDK speaks Connect with JSON; gRPC and gRPC-web are no client of ours.
          grpc: false,
          grpcWeb: false,
        });
      });
    });
  };
}
