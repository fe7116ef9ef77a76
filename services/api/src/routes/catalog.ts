import { PoolClaimCounts, type PoolMember, WarmPoolStore } from '@sandstream/bus';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { allFigures, QueueFigures, TenantQueueFigures } from '../tenant-queue-figures.js';

const PoolFigures = z.object({
  template: z.string(),
  min: z.number(),
  max: z.number(),
  /** Tenants the pool is reserved for; absent: any tenant. */
  tenants: z.array(z.string()).optional(),
  /** Members booting, and members booted and waiting for a claim (claimed ones have left). */
  starting: z.number(),
  ready: z.number(),
  /** Warm claims since the namespace began: a ready member taken (hit), or a cold start (miss). */
  hits: z.number(),
  misses: z.number(),
});

/** What exists: templates, warm pools, and the work queues' figures. */
export function catalogRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    const tags = ['catalog'];
    const queues = ctx.queues.queues;
    const pools = new WarmPoolStore(ctx.redis, ctx.keys);
    const claimCounts = new PoolClaimCounts(ctx.redis, ctx.keys);
    const byTenant = new TenantQueueFigures(ctx.redis, queues);

    app.get(
      '/templates',
      {
        schema: {
          tags,
          summary:
            "The operator's sandbox templates (SANDSTREAM_TEMPLATES_FILE) and the default a spec without one gets",
          response: {
            200: z.object({
              templates: z.array(z.object({ name: z.string(), image: z.string().optional() })),
              default: z.object({ template: z.string().optional(), image: z.string().optional() }),
            }),
          },
        },
      },
      async () => {
        const names = ctx.templates?.names() ?? [];
        return {
          templates: names.map((name) => {
            const spec = ctx.templates?.resolve({ template: name }) as { image?: string } | undefined;
            return { name, ...(spec?.image ? { image: spec.image } : {}) };
          }),
          default: ctx.defaults.template
            ? { template: ctx.defaults.template }
            : { image: ctx.defaults.image },
        };
      },
    );

    app.get(
      '/pools',
      {
        schema: {
          tags,
          summary:
            'Warm pools per template (docs/warm-pools.md): declared min and max, members starting and ready, warm claims hit and missed; a pool reserved for other tenants is not listed',
          response: { 200: z.array(PoolFigures) },
        },
      },
      async (request) => {
        const principal = request.principal;
        const declared = (ctx.templates?.pools() ?? []).filter(
          (p) => p.tenants === null || principal?.admin || p.tenants.includes(principal?.tenant ?? ''),
        );
        if (declared.length === 0) return [];
        const [members, claims] = await Promise.all([
          pools.all(),
          claimCounts.of(declared.map((p) => p.name)),
        ]);
        const count = (pool: string, state: PoolMember['state']) =>
          members.filter((m) => m.pool === pool && m.state === state).length;
        return declared.map((p) => ({
          template: p.name,
          min: p.min,
          max: p.max,
          ...(p.tenants ? { tenants: p.tenants } : {}),
          starting: count(p.name, 'starting'),
          ready: count(p.name, 'ready'),
          hits: claims.get(p.name)?.hits ?? 0,
          misses: claims.get(p.name)?.misses ?? 0,
        }));
      },
    );

    app.get(
      '/queues',
      {
        schema: {
          tags,
          summary: "Work queue figures: the caller's tenant's entries (every tenant's for an admin key)",
          response: { 200: z.array(QueueFigures) },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        return principal.admin ? Promise.all(queues.map(allFigures)) : byTenant.of(principal.tenant);
      },
    );
  };
}
