import type { FastifyPluginAsync } from 'fastify';
import fp from 'fastify-plugin';
import { checkAccess } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { isConsolePath } from '../console-files.js';
import { e2bAuthorization } from '../e2b/e2b-credentials.js';
import { E2bSandboxTokens, isSandboxToken } from '../e2b/e2b-sandbox-tokens.js';
import { sessionCookie } from '../principal.js';
import { namesRecord, scopeRouteId } from '../tenant-scope.js';
import { addToGate } from './request-gate.js';

/** Paths anyone may read: the API's description, and the web console's static files. */
export function isPublic(url: string): boolean {
  return url === '/openapi.json' || url === '/docs' || url.startsWith('/docs/') || isConsolePath(url);
}

/**
 * Who sends each request, and whether they may see the record its route names: every request
 * but the public ones resolves its principal (principal.ts: a key, a WebSocket ticket or a
 * session cookie; 401 otherwise) before anything else, then starts the route's ownership check
 * (`config.access`, access.ts) and its prefetch beside the other gates; the handler waits for
 * them (preHandler). Registered with fastify-plugin: its hooks apply to every route of the app.
 */
const authenticationPlugin: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  const sandboxTokens = new E2bSandboxTokens(ctx);
  app.decorateRequest('principal', undefined);
  app.decorateRequest('gate', undefined);
  app.decorateRequest('prefetched', undefined);
  app.addHook('onRequest', async (request) => {
    if (isPublic(request.url.split('?')[0] ?? '')) return;
    // The preview proxy checks its own callers (keys, preview tokens, public ports).
    if (request.routeOptions.config.ownAuthentication) return;
    // A sandbox's own token opens only its in-sandbox calls (e2b-sandbox-tokens.ts).
    if (isSandboxToken(request.headers['x-access-token'])) {
      request.principal = await sandboxTokens.principalOf(request.headers, request.url.split('?')[0] ?? '');
      return;
    }
    const ticket =
      request.headers.upgrade?.toLowerCase() === 'websocket'
        ? (new URL(request.url, 'http://api').searchParams.get('ticket') ?? undefined)
        : undefined;
    request.principal = await ctx.principals.resolve({
      authorization: e2bAuthorization(request.headers),
      ticket,
      session: sessionCookie(request.headers.cookie),
      remoteAddress: request.socket.remoteAddress,
    });
  });
  app.addHook('preHandler', async (request) => {
    await request.gate;
  });
};

/**
 * The route's ownership check (`config.access`) and prefetch (`config.prefetch`), started once
 * the request is admitted (after rate-limiting.ts's onRequest): a refused request reads nothing.
 */
const accessPlugin: FastifyPluginAsync<{ ctx: ApiContext }> = async (app, { ctx }) => {
  app.addHook('onRequest', async (request) => {
    const principal = request.principal;
    if (!principal) return;
    const config = request.routeOptions.config;
    // Its `:id` is the caller's tenant's id: from here on params.id is the internal one.
    if (namesRecord(config)) scopeRouteId(request);
    const access = config.access;
    const id = (request.params as { id?: unknown } | undefined)?.id;
    if (access && typeof id === 'string') addToGate(request, checkAccess(ctx, principal, id, access));
    if (config.prefetch === 'job' && typeof id === 'string') {
      // No side effect, and nothing of it is sent before the gate passed.
      request.prefetched = ctx.client.get(id);
      request.prefetched.catch(() => {});
    }
  });
};

export const authentication = fp(authenticationPlugin, { name: 'sandstream-authentication', fastify: '5.x' });
export const access = fp(accessPlugin, {
  name: 'sandstream-access',
  fastify: '5.x',
  dependencies: ['sandstream-authentication'],
});
