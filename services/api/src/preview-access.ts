import {
  isScopedJobId,
  PREVIEW_TOKEN_SECONDS,
  previewSecret,
  previewTokenRefusal,
  previewTokenSandbox,
  type SandboxRecord,
  scopedJobId,
  userJobId,
} from '@sandstream/bus';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ApiContext } from './api-context.js';
import type { PreviewTargets } from './preview-targets.js';
import { maySee, type Principal } from './principal.js';
import { HttpProblem, notFound } from './problem.js';

/** Each request's principal, resolved once (the path-id resolution and the access check ask). */
const principals = new WeakMap<FastifyRequest, Promise<Principal>>();

/** The principal of the request's API key (or the anonymous one, where that is on). */
function principalOf(ctx: ApiContext, request: FastifyRequest): Promise<Principal> {
  let principal = principals.get(request);
  if (!principal) {
    principal = ctx.principals.resolve({
      authorization: request.headers.authorization,
      ticket: undefined,
      remoteAddress: request.socket.remoteAddress,
    });
    principal.catch(() => undefined);
    principals.set(request, principal);
  }
  return principal;
}

/** The cookie a preview's `?token=` becomes, scoped to its host (host form) or path (path form). */
export const PREVIEW_COOKIE = 'sandstream_preview';

/** Every value of the preview cookie in a Cookie header (a browser may send more than one). */
function previewCookies(header: string | undefined): string[] {
  if (!header) return [];
  return header
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part.startsWith(`${PREVIEW_COOKIE}=`))
    .map((part) => part.slice(PREVIEW_COOKIE.length + 1));
}

/** A request's preview tokens: its `?token=` if it has one, else the preview cookies it sent. */
function previewTokensOf(request: FastifyRequest): { queryToken: string | undefined; tokens: string[] } {
  // Most requests (a page's assets, a keyed client) carry none: no URL parse for them.
  const queryToken = request.url.includes('token=')
    ? (new URL(request.url, 'http://api').searchParams.get('token') ?? undefined)
    : undefined;
  return {
    queryToken,
    tokens: queryToken !== undefined ? [queryToken] : previewCookies(request.headers.cookie),
  };
}

/** The Cookie header without our own cookies: the sandbox's app never sees them. */
export function cookiesForSandbox(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const kept = header
    .split(';')
    .map((part) => part.trim())
    .filter(
      (part) =>
        part !== '' && !part.startsWith(`${PREVIEW_COOKIE}=`) && !part.startsWith('sandstream_session='),
    );
  return kept.length > 0 ? kept.join('; ') : undefined;
}

/**
 * Lets a request through to a sandbox's port, or throws: a public port opens to anyone; else an
 * API key (another tenant's is a 404, as everywhere), else a preview token bound to this sandbox
 * and port (`?token=`, then the cookie set here; a WebSocket upgrade may carry either), else the
 * API's anonymous access where it is on. `cookiePath`: the path form's prefix; the host form's
 * cookie is host-only (no Domain attribute), so one preview's cookie never reaches another's host.
 */
export async function authorizePreview(
  ctx: ApiContext,
  targets: PreviewTargets,
  request: FastifyRequest,
  reply: FastifyReply,
  record: SandboxRecord,
  port: number,
  cookiePath: string,
): Promise<void> {
  const { queryToken, tokens } = previewTokensOf(request);
  // Credentials first (no Redis read when a key is cached); a public port opens without any.
  const refusal = await credentialRefusal(ctx, request, record, port, tokens);
  if (refusal === undefined) {
    if (queryToken !== undefined) {
      reply.header(
        'set-cookie',
        `${PREVIEW_COOKIE}=${queryToken}; Path=${cookiePath}; Max-Age=${PREVIEW_TOKEN_SECONDS}; HttpOnly; SameSite=Lax`,
      );
    }
    return;
  }
  if (await targets.isPublic(record.id, port)) return;
  throw refusal;
}

/** Why the request's key or token does not open the port (a problem to throw), or undefined. */
async function credentialRefusal(
  ctx: ApiContext,
  request: FastifyRequest,
  record: SandboxRecord,
  port: number,
  tokens: string[],
): Promise<Error | undefined> {
  try {
    if (request.headers.authorization !== undefined || tokens.length === 0) {
      const principal = await principalOf(ctx, request);
      return maySee(principal, record.tenant) ? undefined : notFound(`sandbox ${record.id}`);
    }
  } catch (err) {
    return err as Error;
  }
  const secret = await previewSecret(ctx.redis, ctx.keys);
  const want = { sandboxId: record.id, port, nowSeconds: Math.floor(Date.now() / 1000) };
  let refusal: string | undefined = 'no preview token';
  for (const token of tokens) {
    refusal = previewTokenRefusal(secret, token, want);
    if (refusal === undefined) return undefined;
  }
  return new HttpProblem(403, 'forbidden', refusal);
}

/**
 * The internal id a path-form preview means (`/v1/sandboxes/{id}/proxy/…`, tenant-ids.ts): the
 * id as its user knows it, in the tenant of the request's API key, or the sandbox its preview
 * token names; an internal id (a public URL's) is taken as it is. Which one is checked after.
 */
export async function previewPathId(ctx: ApiContext, request: FastifyRequest, id: string): Promise<string> {
  if (isScopedJobId(id)) return id;
  if (request.headers.authorization !== undefined) {
    const principal = await principalOf(ctx, request).catch(() => undefined);
    return principal ? scopedJobId(principal.tenant, id) : id;
  }
  const { tokens } = previewTokensOf(request);
  for (const token of tokens) {
    const named = previewTokenSandbox(token);
    if (named !== undefined && userJobId(named) === id) return named;
  }
  return id;
}

/**
 * What a preview request for no sandbox we can find answers: without a credential a 401 (as for
 * any sandbox: nothing tells whether it exists), with a token naming another sandbox a 403 (as a
 * found sandbox would answer it), else the 404 of a missing or another tenant's sandbox.
 */
export function missingPreviewTarget(request: FastifyRequest, id: string): Error {
  if (request.headers.authorization !== undefined) return notFound(`sandbox ${id}`);
  const { tokens } = previewTokensOf(request);
  if (tokens.length === 0)
    return new HttpProblem(401, 'unauthorized', 'an API key or a preview token is required');
  return new HttpProblem(403, 'forbidden', 'the preview token is for another sandbox or port, not this one');
}
