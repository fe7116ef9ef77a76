import { tenantIdPrefix, userJobId } from '@sandstream/bus';
import { SandboxNotFoundError, SandstreamOptionsError } from '@sandstream/client';
import type { SandboxHost } from '@sandstream/client/mcp';
import { checkAccess } from '../access.js';
import type { ApiContext } from '../api-context.js';
import type { PreviewConfig } from '../preview-config.js';
import type { Principal } from '../principal.js';
import { HttpProblem } from '../problem.js';
import { previewUrlOf } from '../routes/sandbox-ports.js';
import { internalId, scopeSpecId, withUserId } from '../tenant-scope.js';

/** How long create_sandbox waits for readiness, as POST /v1/sandboxes does by default. */
const READY_SECONDS = 120;

/**
 * The MCP tools' host for one API key: everything in the key's tenant (an admin key's too: MCP
 * has no tenant argument), ids as its user knows them, resolved to the internal ones the way the
 * REST routes resolve `:id` (tenant-scope.ts) and checked the way they check it (access.ts), so
 * another tenant's sandbox is not found, whatever its id.
 */
export function tenantSandboxHost(
  ctx: ApiContext,
  principal: Principal,
  preview: PreviewConfig,
  apiBase: string,
): SandboxHost {
  const tenant = principal.tenant;
  const own: Principal = { ...principal, admin: false };
  const prefix = tenantIdPrefix(tenant);
  /** The internal id of one of the tenant's sandboxes, or SandboxNotFoundError. */
  const visible = async (id: string): Promise<string> => {
    let internal: string;
    try {
      internal = internalId(tenant, id, 'sandboxId');
    } catch (err) {
      throw new SandstreamOptionsError((err as Error).message);
    }
    try {
      await checkAccess(ctx, own, internal, 'sandbox');
    } catch (err) {
      if (err instanceof HttpProblem && err.status === 404) throw new SandboxNotFoundError(id);
      throw err;
    }
    return internal;
  };
  return {
    create: async (input) => {
      const spec: Record<string, unknown> = { ...input, tenant };
      scopeSpecId(spec);
      if (spec.image === undefined && spec.template === undefined && spec.fromSnapshot === undefined) {
        if (ctx.defaults.template !== undefined) spec.template = ctx.defaults.template;
        else spec.image = ctx.defaults.image;
      }
      const record = await ctx.client.sandboxes.createRecord(spec, { timeoutSeconds: READY_SECONDS });
      return userJobId(record.id);
    },
    sandbox: async (id) => ctx.client.sandboxes.handle(await visible(id), { tenant }),
    list: async (labels) =>
      (await ctx.client.sandboxes.list({ tenant, ...(labels ? { labels } : {}) })).map(withUserId),
    close: async (id) => withUserId(await ctx.client.sandboxes.close(await visible(id))),
    previewUrl: async (id, port, open) =>
      (await previewUrlOf(ctx, preview, apiBase, { id: await visible(id), port, open, form: 'path' })).url,
    // The SDK's messages name internal ids: a model is shown its own.
    describe: (message) => (prefix === '' ? message : message.replaceAll(prefix, '')),
  };
}
