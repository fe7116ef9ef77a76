import {
  LiveSandboxSpecSchema,
  previewDomainForE2b,
  registerPreview,
  type SandboxRecord,
  SnapshotIdSchema,
} from '@sandstream/bus';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import type { PreviewConfig } from '../preview-config.js';
import { tenantFor } from '../principal.js';
import { HttpProblem, notFound } from '../problem.js';
import { idTenant, internalId, scopeSpecId } from '../tenant-scope.js';
import { controlPlaneErrors, unsupported } from './e2b-errors.js';
import { listPage } from './e2b-list-page.js';
import { e2bMetricOf } from './e2b-metrics.js';
import { ownedSandbox } from './e2b-sandbox.js';
import { e2bStateOf, listedSandbox, sandboxDetail } from './e2b-sandbox-json.js';
import { E2bSandboxTokens } from './e2b-sandbox-tokens.js';

/** E2B's template for "no template in particular": the operator's default here. */
const E2B_DEFAULT_TEMPLATE = 'base';
const READY_SECONDS = 120;
/** The most sandboxes a listing pages through (the store's own bound on one list). */
const LIST_MAX = 1000;

const CreateBody = z.object({
  templateID: z.string().min(1).max(253),
  metadata: z.record(z.string(), z.string()).optional(),
  envVars: z.record(z.string(), z.string()).optional(),
  timeout: z.number().int().positive().optional(),
  allow_internet_access: z.boolean().optional(),
  autoPause: z.boolean().optional(),
  secure: z.boolean().optional(),
});
const ForkBody = z
  .object({ count: z.number().int().min(1).max(100).optional(), timeout: z.number().int().min(1).optional() })
  .nullish();
const SnapshotBody = z.object({ name: z.string().min(1).max(256).optional() }).nullish();
const TimeoutBody = z.object({ timeout: z.number().int().min(0) });
const ConnectBody = z.object({ timeout: z.number().int().min(0).optional() }).nullish();
const SandboxParams = z.object({ sandboxID: z.string().min(1).max(256) });
const TemplateParams = z.object({ templateID: z.string().min(1).max(256) });
const SnapshotListQuery = z.strictObject({
  sandboxID: z.string().min(1).max(256).optional(),
  name: z.string().min(1).max(256).optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  nextToken: z.string().optional(),
});
const ListQuery = z.object({
  metadata: z.string().max(4096).optional(),
  state: z.string().optional(),
  limit: z.coerce.number().int().min(1).max(1000).optional(),
  nextToken: z.string().optional(),
});

function parse<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = `${where}${issue?.path.length ? `.${issue.path.join('.')}` : ''}`;
  throw new HttpProblem(400, 'invalid-request', `${field}: ${issue?.message ?? 'invalid'}`, [
    { field, rule: issue?.message ?? 'invalid' },
  ]);
}

/** `a=1&b=2` (the SDK's metadata filter, URL-encoded pairs) → labels. */
function metadataFilter(raw: string | undefined): Record<string, string> | undefined {
  if (raw === undefined || raw === '') return undefined;
  return Object.fromEntries(new URLSearchParams(raw));
}

/**
 * E2B's control-plane REST paths (the ones its JS SDK calls), on our sandboxes: create, get,
 * list, timeout, connect (resumes a paused one), pause, kill. Each `sandboxID` is the caller's
 * tenant's, checked as every `:id` route checks it.
 */
export function e2bControlPlaneRoutes(ctx: ApiContext, preview: PreviewConfig): FastifyPluginAsync {
  return async (app) => {
    app.setErrorHandler(controlPlaneErrors);
    const sandboxes = ctx.client.sandboxes;
    const tokens = new E2bSandboxTokens(ctx);
    const record = async (id: string): Promise<SandboxRecord> => {
      const found = await sandboxes.get(id);
      if (!found || e2bStateOf(found) === undefined) throw notFound(`sandbox ${id}`);
      return found;
    };
    /**
     * The create / connect / get answer. Its `domain` makes the SDK's `getHost(port)` this
     * sandbox's host-form preview (preview-label.ts), whose label is registered here as a
     * preview URL's is: no call of the SDK asks for one first.
     */
    const detail = async (found: SandboxRecord, request: FastifyRequest) => {
      const domain = previewDomainForE2b(found.tenant, found.id, preview.domain);
      if (domain !== undefined)
        await registerPreview(ctx.redis, ctx.keys, {
          tenant: found.tenant,
          sandboxId: found.id,
          port: 0,
          public: false,
        });
      return sandboxDetail(found, await tokens.mint(principalOf(request), found.id), domain);
    };

    app.post('/v2/sandboxes', async (request, reply) => {
      const body = parse(CreateBody, request.body, 'body');
      const spec: Record<string, unknown> = {
        tenant: tenantFor(principalOf(request), undefined),
        labels: body.metadata ?? {},
        env: body.envVars ?? {},
        ...(body.timeout !== undefined ? { timeoutSeconds: body.timeout } : {}),
        ...(body.autoPause === true ? { onIdle: 'pause' } : {}),
        ...(body.allow_internet_access === false ? { network: 'deny-egress' } : {}),
      };
      // A snapshot id as the template: a sandbox from that snapshot (E2B's create from a snapshot).
      if (SnapshotIdSchema.safeParse(body.templateID).success) spec.fromSnapshot = body.templateID;
      else if (body.templateID !== E2B_DEFAULT_TEMPLATE) spec.template = body.templateID;
      else if (ctx.defaults.template !== undefined) spec.template = ctx.defaults.template;
      else spec.image = ctx.defaults.image;
      scopeSpecId(spec);
      const created = await sandboxes.createRecord(parse(LiveSandboxSpecSchema, spec, 'body'), {
        wait: true,
        timeoutSeconds: READY_SECONDS,
      });
      return reply.code(201).send(await detail(created, request));
    });

    app.get('/v2/sandboxes', async (request, reply) => {
      const query = parse(ListQuery, request.query, 'querystring');
      const labels = metadataFilter(query.metadata);
      const states = query.state?.split(',').filter((s) => s !== '') ?? ['running', 'paused'];
      const found = await sandboxes.list({
        tenant: tenantFor(principalOf(request), undefined),
        ...(labels ? { labels } : {}),
        limit: LIST_MAX,
      });
      const listed = found.filter((r) => {
        const state = e2bStateOf(r);
        return state !== undefined && states.includes(state);
      });
      const { page, nextToken } = listPage(listed, query.limit ?? 100, query.nextToken);
      if (nextToken !== undefined) reply.header('x-next-token', nextToken);
      return reply.send(page.map(listedSandbox));
    });

    app.get('/sandboxes/:sandboxID', async (request) => {
      const { sandboxID } = parse(SandboxParams, request.params, 'params');
      const sandbox = await ownedSandbox(ctx, request, sandboxID, 'params.sandboxID');
      return detail(await record(sandbox.id), request);
    });

    app.delete('/sandboxes/:sandboxID', async (request, reply) => {
      const { sandboxID } = parse(SandboxParams, request.params, 'params');
      const sandbox = await ownedSandbox(ctx, request, sandboxID, 'params.sandboxID');
      await record(sandbox.id);
      await sandboxes.close(sandbox.id);
      return reply.code(204).send();
    });

    app.post('/sandboxes/:sandboxID/timeout', async (request, reply) => {
      const { sandboxID } = parse(SandboxParams, request.params, 'params');
      const { timeout } = parse(TimeoutBody, request.body, 'body');
      const sandbox = await ownedSandbox(ctx, request, sandboxID, 'params.sandboxID');
      await record(sandbox.id);
      await sandbox.setTimeout(Math.max(1, timeout));
      return reply.code(204).send();
    });

    app.post('/v2/sandboxes/:sandboxID/connect', async (request, reply) => {
      const { sandboxID } = parse(SandboxParams, request.params, 'params');
      const body = parse(ConnectBody, request.body, 'body');
      const sandbox = await ownedSandbox(ctx, request, sandboxID, 'params.sandboxID');
      const found = await record(sandbox.id);
      const resumed =
        e2bStateOf(found) === 'paused'
          ? await sandbox.resume({ wait: true, timeoutSeconds: READY_SECONDS })
          : found;
      if (body?.timeout) await sandbox.setTimeout(body.timeout);
      return reply.code(e2bStateOf(found) === 'paused' ? 201 : 200).send(await detail(resumed, request));
    });

    app.post('/sandboxes/:sandboxID/pause', async (request, reply) => {
      const { sandboxID } = parse(SandboxParams, request.params, 'params');
      const sandbox = await ownedSandbox(ctx, request, sandboxID, 'params.sandboxID');
      await record(sandbox.id);
      await sandbox.pause();
      return reply.code(204).send();
    });

    app.get('/sandboxes/:sandboxID/metrics', async (request) => {
      const { sandboxID } = parse(SandboxParams, request.params, 'params');
      const sandbox = await ownedSandbox(ctx, request, sandboxID, 'params.sandboxID');
      const found = await record(sandbox.id);
      if (e2bStateOf(found) === 'paused') return [];
      return [e2bMetricOf(found, await sandbox.stats())];
    });

    // A snapshot of its files (our `sandbox.snapshot`); its id is a template for create.
    app.post('/sandboxes/:sandboxID/snapshots', async (request, reply) => {
      const { sandboxID } = parse(SandboxParams, request.params, 'params');
      const body = parse(SnapshotBody, request.body, 'body');
      const sandbox = await ownedSandbox(ctx, request, sandboxID, 'params.sandboxID');
      await record(sandbox.id);
      const taken = await sandbox.snapshot(body?.name ? { name: body.name } : {});
      return reply.code(201).send({ snapshotID: taken.snapshotId, names: body?.name ? [body.name] : [] });
    });

    // The tenant's snapshots (E2B's `Sandbox.listSnapshots`), newest first, paged as sandboxes
    // are; `sandboxID` keeps those taken of one sandbox, `name` those of one name.
    app.get('/snapshots', async (request, reply) => {
      const query = parse(SnapshotListQuery, request.query, 'querystring');
      const tenant = tenantFor(principalOf(request), undefined);
      const of =
        query.sandboxID === undefined
          ? undefined
          : internalId(idTenant(request), query.sandboxID, 'querystring.sandboxID');
      const listed = (await ctx.client.snapshots.forTenant(tenant).list())
        .filter(
          (s) =>
            (of === undefined || s.fromSandbox === of) && (query.name === undefined || s.name === query.name),
        )
        .map((s) => ({ id: s.snapshotId, createdAt: s.createdAt, names: s.name ? [s.name] : [] }));
      const { page, nextToken } = listPage(listed, query.limit ?? 100, query.nextToken);
      if (nextToken !== undefined) reply.header('x-next-token', nextToken);
      return reply.send(page.map((s) => ({ snapshotID: s.id, names: s.names })));
    });

    // E2B deletes a snapshot as a template: ours are snapshots only (no templates are deleted
    // here), so any other id is simply not found, which the SDK answers as `false`.
    app.delete('/templates/:templateID', async (request, reply) => {
      const { templateID } = parse(TemplateParams, request.params, 'params');
      const tenant = tenantFor(principalOf(request), undefined);
      await ctx.client.snapshots.forTenant(tenant).delete(templateID);
      return reply.code(204).send();
    });

    // Our fork: `count` new sandboxes from a capture of its files, each answered as E2B's
    // per-fork result; `timeout` is each one's lifetime, as E2B's is.
    app.post('/sandboxes/:sandboxID/fork', async (request, reply) => {
      const { sandboxID } = parse(SandboxParams, request.params, 'params');
      const body = parse(ForkBody, request.body, 'body');
      const sandbox = await ownedSandbox(ctx, request, sandboxID, 'params.sandboxID');
      await record(sandbox.id);
      const forks = await sandbox.fork({ count: body?.count ?? 1 });
      const results = await Promise.all(
        forks.map(async (fork) => {
          if (body?.timeout !== undefined) await fork.setTimeout(body.timeout);
          return { sandbox: await detail(await record(fork.id), request) };
        }),
      );
      return reply.code(201).send(results);
    });

    // Everything else E2B's control plane has (templates, snapshots, metrics, network, fork …)
    // answers the SDK's error for a call this server does not serve, naming it.
    app.all('/sandboxes/*', async (request) => {
      throw unsupported(`${request.method} ${request.url.split('?')[0]}`);
    });
    app.all('/v2/*', async (request) => {
      throw unsupported(`${request.method} ${request.url.split('?')[0]}`);
    });
  };
}
