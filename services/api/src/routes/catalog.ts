import {
  FileTemplateError,
  PoolClaimCounts,
  type PoolMember,
  TemplateInfoSchema,
  TemplateNotFoundError,
  TemplateRefSchema,
  WarmPoolStore,
} from '@sandstream/bus';
import { strictObject } from '@sandstream/wire';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { HttpProblem } from '../problem.js';
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
            "Every template: the operator's (source file, SANDSTREAM_TEMPLATES_FILE) and those `sandstream template build` registered (source built, with their creation time; shadowed when the file has the name too, as the file wins), and the default a spec without one gets",
          response: {
            200: z.object({
              templates: z.array(TemplateInfoSchema),
              default: z.object({ template: z.string().optional(), image: z.string().optional() }),
            }),
          },
        },
      },
      async () => {
        const fromFile = ctx.templates?.names() ?? [];
        const built = await ctx.client.templates.list();
        return {
          templates: [
            ...fromFile.map((name) => {
              const spec = ctx.templates?.resolve({ template: name }) as { image?: string } | undefined;
              return { name, source: 'file' as const, ...(spec?.image ? { image: spec.image } : {}) };
            }),
            ...built.map((t) => (fromFile.includes(t.name) ? { ...t, shadowed: true } : t)),
          ],
          default: ctx.defaults.template
            ? { template: ctx.defaults.template }
            : { image: ctx.defaults.image },
        };
      },
    );

    app.delete(
      '/templates/:name',
      {
        schema: {
          tags,
          summary:
            "Unregister a built template (admin keys only: a built template serves every tenant). Its image stays on the engine. 404 template-not-found when no built template has the name; 409 template-in-file for one of the operator's templates (SANDSTREAM_TEMPLATES_FILE), which only that file changes. A built template the file shadows is removed",
          params: strictObject({ name: TemplateRefSchema }),
          // Nothing to ask beyond the name: a flag such as ?force=1 is refused, not ignored.
          querystring: strictObject({}),
          response: { 204: z.null().describe('removed'), ...problemResponses(403, 404, 409) },
        },
      },
      async (request, reply) => {
        if (!principalOf(request).admin)
          throw new HttpProblem(
            403,
            'forbidden',
            'removing a template is for admin keys: a built template serves every tenant',
          );
        const { name } = request.params;
        try {
          await ctx.client.templates.delete(name);
        } catch (err) {
          // The file's own template: say so rather than "not found" (it is there, just not ours).
          if (err instanceof TemplateNotFoundError && ctx.templates?.names().includes(name))
            throw new FileTemplateError(name);
          throw err;
        }
        return reply.code(204).send(null);
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
