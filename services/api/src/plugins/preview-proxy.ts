import type { IncomingHttpHeaders } from 'node:http';
import replyFrom from '@fastify/reply-from';
import { parsePreviewHost, sandboxOfLabel, sandboxRecordOf } from '@sandstream/bus';
import { requireReachable, SandboxPortUnreachableError } from '@sandstream/client';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import WebSocket, { type RawData } from 'ws';
import type { ApiContext } from '../api-context.js';
import {
  authorizePreview,
  cookiesForSandbox,
  missingPreviewTarget,
  previewPathId,
} from '../preview-access.js';
import type { PreviewConfig } from '../preview-config.js';
import { PreviewConnections } from '../preview-connections.js';
import {
  exchange,
  mergeHeaders,
  passesThrough,
  relay,
  requestHead,
  UpstreamError,
} from '../preview-passthrough.js';
import { withPathFormCsp } from '../preview-path-csp.js';
import { PreviewTargets } from '../preview-targets.js';
import { type Upstream, UpstreamSockets } from '../preview-upstream-sockets.js';
import { notFound, sendProblem } from '../problem.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route authenticates its requests itself (the preview proxy: keys, tokens, public ports). */
    ownAuthentication?: boolean;
  }
}

/** Where host-form requests are routed (app.ts rewriteUrl): never reachable by path from outside. */
export const HOST_FORM_PREFIX = '/_preview-host';

/** How long the sandbox's app may take to start its answer. */
const HEADERS_TIMEOUT_MS = 300_000;

const PATH_FORM = /^\/v1\/sandboxes\/([^/?]+)\/proxy\/(\d{1,5})(\/[^?]*)?(\?.*)?$/;

/** The request URL the API routes: a host-form preview's Host sends it to the proxy's own route. */
export function rewritePreviewUrl(preview: PreviewConfig, host: string | undefined, url: string): string {
  return parsePreviewHost(host, preview.domain) ? `${HOST_FORM_PREFIX}${url}` : url;
}

/** The query without `token` (the sandbox's app never sees it). */
function queryForSandbox(query: string | undefined): string {
  if (!query) return '';
  const params = new URLSearchParams(query.slice(1));
  params.delete('token');
  const rest = params.toString();
  return rest ? `?${rest}` : '';
}

/**
 * The preview proxy: `/v1/sandboxes/{id}/proxy/{port}/…` and `{port}-{label}.{domain}` sent on
 * to the sandbox's port at the address its backend recorded (JobSandbox.host). Body-less GETs
 * (pages, assets, downloads) are relayed socket to socket (preview-passthrough.ts); every other
 * request goes through @fastify/reply-from (undici): bodies stream both ways (nothing is read whole, no body limit
 * applies), SSE flows as it comes, and a WebSocket upgrade is relayed frame by frame. Not
 * registered with fastify-plugin: its pass-through body parser stays in its own scope.
 */
export function previewProxy(ctx: ApiContext, preview: PreviewConfig): FastifyPluginAsync {
  return async (app) => {
    const targets = new PreviewTargets(ctx);
    const connections = new PreviewConnections(async (id) => {
      const job = await ctx.client.get(id);
      return job ? sandboxRecordOf(job) : null;
    });
    app.addHook('preClose', async () => connections.closeAll());
    const forward = preview.forward ?? 'passthrough';
    const upstreams = new UpstreamSockets();
    app.addHook('onClose', async () => upstreams.closeAll());
    await app.register(replyFrom, {
      // No deadline on an answer's body (SSE, a long download); the headers within the API's own bound.
      undici: { headersTimeout: HEADERS_TIMEOUT_MS, bodyTimeout: 0, connections: 256, pipelining: 1 },
      disableRequestLogging: true,
    });
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));

    /** Which sandbox and port a request is for, and the path to ask there. */
    const targetOf = async (
      request: FastifyRequest,
    ): Promise<{ id: string; port: number; path: string; cookiePath: string; pathForm: boolean }> => {
      if (request.url.startsWith(HOST_FORM_PREFIX)) {
        const host = parsePreviewHost(request.headers.host, preview.domain);
        const id = host ? await sandboxOfLabel(ctx.redis, ctx.keys, host.label) : null;
        if (!host || id === null) throw notFound(`preview ${request.headers.host ?? ''}`);
        const original = request.url.slice(HOST_FORM_PREFIX.length) || '/';
        const at = original.indexOf('?');
        const path = at === -1 ? original : original.slice(0, at);
        return {
          id,
          port: host.port,
          path: `${path}${queryForSandbox(at === -1 ? undefined : original.slice(at))}`,
          cookiePath: '/',
          pathForm: false,
        };
      }
      const match = PATH_FORM.exec(request.url);
      if (!match) throw notFound(`route ${request.url}`);
      const rawId = match[1] as string;
      const port = Number(match[2]);
      return {
        id: decodeURIComponent(rawId),
        port,
        path: `${match[3] ?? '/'}${queryForSandbox(match[4])}`,
        cookiePath: `/v1/sandboxes/${rawId}/proxy/${port}/`,
        pathForm: true,
      };
    };

    /** Checks the caller and the sandbox; answers the upstream origin (`http://host:port`). */
    const open = async (request: FastifyRequest, reply: FastifyReply) => {
      const target = await targetOf(request);
      if (target.port < 1 || target.port > 65535) throw notFound(`port ${target.port}`);
      // A host form's label names the internal id; a path form names the id as its user knows it.
      const id = request.url.startsWith(HOST_FORM_PREFIX)
        ? target.id
        : await previewPathId(ctx, request, target.id);
      const record = await targets.record(id);
      if (!record) throw missingPreviewTarget(request, target.id);
      await authorizePreview(ctx, targets, request, reply, record, target.port, target.cookiePath);
      requireReachable(record);
      const host = record.sandbox?.host;
      if (!host)
        throw new SandboxPortUnreachableError(
          target.port,
          `port ${target.port} of sandbox ${target.id} cannot be reached: its backend recorded no address`,
        );
      const origin = `http://${host.includes(':') ? `[${host}]` : host}:${target.port}`;
      // The Host the app sees, as reply-from sends it (the URL's host: no `:80`).
      const hostHeader =
        target.port === 80 ? origin.slice('http://'.length, -':80'.length) : origin.slice('http://'.length);
      return { ...target, id: record.id, host, hostHeader, origin };
    };

    const unreachable = (port: number, id: string, why: string) =>
      new SandboxPortUnreachableError(port, `nothing answers on port ${port} of sandbox ${id}: ${why}`);

    const forwardHeaders = (headers: IncomingHttpHeaders): IncomingHttpHeaders => {
      const { authorization: _key, cookie, ...rest } = headers;
      const kept = cookiesForSandbox(cookie);
      return kept ? { ...rest, cookie: kept } : rest;
    };

    /** A body-less GET relayed socket to socket (preview-passthrough.ts). */
    const passThrough = async (
      request: FastifyRequest,
      reply: FastifyReply,
      target: Awaited<ReturnType<typeof open>>,
    ) => {
      let upstream: Upstream;
      try {
        upstream = await upstreams.acquire(target.host, target.port);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        return sendProblem(request, reply, unreachable(target.port, target.id, code));
      }
      // A client gone before the answer: the exchange fails at once rather than at its timeout.
      const abandon = () => upstream.socket.destroy();
      reply.raw.once('close', abandon);
      const head = requestHead(target.path, target.hostHeader, forwardHeaders(request.headers));
      let answer: Awaited<ReturnType<typeof exchange>>;
      try {
        answer = await exchange(upstream, head, HEADERS_TIMEOUT_MS);
      } catch (err) {
        reply.raw.off('close', abandon);
        if (reply.raw.destroyed) return reply.hijack();
        const why = err instanceof UpstreamError ? err.message : String(err);
        return sendProblem(request, reply, unreachable(target.port, target.id, why));
      }
      reply.raw.off('close', abandon);
      reply.hijack();
      // The path form is the API's own origin: its pages run sandboxed (preview-path-csp.ts).
      const theirs = target.pathForm ? withPathFormCsp(answer.head.headers) : answer.head.headers;
      relay(answer, mergeHeaders(reply.getHeaders(), theirs), reply.raw, (reusable) => {
        if (reusable) upstreams.release(target.host, target.port, upstream);
      });
    };

    const http = async (request: FastifyRequest, reply: FastifyReply) => {
      const target = await open(request, reply);
      const release = connections.add(target.id, { close: () => request.raw.socket.destroy() });
      reply.raw.once('close', release);
      if (forward === 'passthrough' && passesThrough(request.raw, target.path))
        return passThrough(request, reply, target);
      return reply.from(`${target.origin}${target.path}`, {
        rewriteRequestHeaders: (_req, headers) => forwardHeaders(headers),
        // The path form is the API's own origin: its pages run sandboxed (preview-path-csp.ts).
        ...(target.pathForm ? { rewriteHeaders: withPathFormCsp } : {}),
        // Never replayed: a request reaches the sandbox's app at most once.
        retryDelay: () => null,
        onError: (_failed, { error }) => {
          const cause = (error as { cause?: { code?: string; message?: string } }).cause;
          sendProblem(request, reply, unreachable(target.port, target.id, cause?.code ?? error.message));
        },
      });
    };

    /** A WebSocket upgrade: a second WebSocket to the sandbox's port, frames relayed both ways. */
    const websocket = (client: WebSocket, request: FastifyRequest) => {
      const target = (request as FastifyRequest & { previewTarget?: Awaited<ReturnType<typeof open>> })
        .previewTarget;
      if (!target) {
        client.close(1011, 'preview target unknown');
        return;
      }
      const protocols = request.headers['sec-websocket-protocol']
        ?.split(',')
        .map((p) => p.trim())
        .filter(Boolean);
      const upstream = new WebSocket(`${target.origin.replace(/^http/, 'ws')}${target.path}`, protocols, {
        headers: Object.fromEntries(
          Object.entries(forwardHeaders(request.headers)).filter(
            ([name]) =>
              !name.startsWith('sec-websocket') && !['connection', 'upgrade', 'host'].includes(name),
          ),
        ) as Record<string, string>,
        perMessageDeflate: false,
      });
      const pending: { data: RawData; binary: boolean }[] = [];
      const release = connections.add(target.id, {
        close: () => {
          client.terminate();
          upstream.terminate();
        },
      });
      client.on('message', (data, binary) => {
        if (upstream.readyState === WebSocket.OPEN) upstream.send(data, { binary });
        else pending.push({ data, binary });
      });
      upstream.on('open', () => {
        for (const { data, binary } of pending.splice(0)) upstream.send(data, { binary });
      });
      upstream.on('message', (data, binary) => client.send(data, { binary }));
      const closeCode = (code: number) => (code === 1005 || code === 1006 || code < 1000 ? 1000 : code);
      upstream.on('close', (code, reason) => {
        release();
        if (client.readyState === WebSocket.OPEN) client.close(closeCode(code), reason);
      });
      client.on('close', (code, reason) => {
        release();
        if (upstream.readyState === WebSocket.OPEN) upstream.close(closeCode(code), reason);
        else upstream.terminate();
      });
      upstream.on('error', () => {
        release();
        if (client.readyState === WebSocket.OPEN)
          client.close(1011, `port ${target.port} refused the WebSocket`);
      });
      client.on('error', () => upstream.terminate());
    };

    const routeOptions = {
      config: { ownAuthentication: true },
      schema: { hide: true },
      // Checked before the upgrade too: a refused WebSocket is answered with its problem.
      preHandler: async (request: FastifyRequest, reply: FastifyReply) => {
        if (request.headers.upgrade?.toLowerCase() === 'websocket')
          (request as FastifyRequest & { previewTarget?: unknown }).previewTarget = await open(
            request,
            reply,
          );
      },
    };
    // With the app's ignoreTrailingSlash, `/x/` is routed as `/x`: each prefix is its own route too.
    const urls = [
      '/v1/sandboxes/:id/proxy/:port',
      '/v1/sandboxes/:id/proxy/:port/*',
      HOST_FORM_PREFIX,
      `${HOST_FORM_PREFIX}/*`,
    ];
    for (const url of urls) {
      app.route({ method: 'GET', url, ...routeOptions, handler: http, wsHandler: websocket });
      app.route({
        method: ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'],
        url,
        ...routeOptions,
        handler: http,
      });
    }
  };
}
