import { JobField, type KeySpace, type RedisClient } from '@sandstream/bus';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { maySee, type Principal } from './principal.js';
import { notFound } from './problem.js';

/** The principal of a request that passed authentication (every /v1 and /api route). */
export function principalOf(request: FastifyRequest): Principal {
  const principal = request.principal;
  if (!principal) throw new Error('route reached without authentication');
  return principal;
}

/**
 * Checks that `id` names a record of `kind` the principal may see, in one small read (tenant and
 * kind only). Anything else — unknown, another tenant's, the other kind — is the same 404, so
 * a caller learns nothing about ids it may not use.
 */
export async function checkAccess(
  ctx: { redis: RedisClient; keys: KeySpace },
  principal: Principal,
  id: string,
  kind: 'sandbox' | 'job' | 'any',
): Promise<void> {
  const [tenant, storedKind] = await ctx.redis.hmget(ctx.keys.job(id), JobField.tenant, JobField.kind);
  const actual = storedKind === 'sandbox' ? 'sandbox' : 'job';
  if (
    tenant === null ||
    tenant === undefined ||
    !maySee(principal, tenant) ||
    (kind !== 'any' && kind !== actual)
  ) {
    throw notFound(`${kind === 'any' ? 'job' : kind} ${id}`);
  }
}

/**
 * Every route of this plugin with an `:id` checks it before its handler runs (app.ts starts the
 * check with the rate limit, in onRequest): the handlers then use the SDK on that id directly.
 */
export function requireAccess(app: Pick<FastifyInstance, 'addHook'>, kind: 'sandbox' | 'job' | 'any'): void {
  app.addHook('onRoute', (route) => {
    const config = route.config as { checkedByCommand?: boolean } | undefined;
    if (route.url.includes(':id') && !config?.checkedByCommand)
      route.config = { ...route.config, access: kind };
  });
}
