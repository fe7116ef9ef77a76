import type { FastifyRequest } from 'fastify';
import { principalOf } from './access.js';
import type { ApiContext } from './api-context.js';
import { tenantFor } from './principal.js';

/**
 * Before a sandbox or job spec is validated: its tenant is the caller's (an admin's may name
 * another; anyone else naming another is refused), and a spec with neither image nor template
 * gets the operator's default (seed 003's `{"id": "my-sandbox"}` makes a sandbox).
 */
export function applySpecDefaults(ctx: ApiContext) {
  return async (request: FastifyRequest): Promise<void> => {
    const body = request.body;
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return;
    const spec = body as Record<string, unknown>;
    const asked = typeof spec.tenant === 'string' ? spec.tenant : undefined;
    if (spec.tenant === undefined || asked !== undefined)
      spec.tenant = tenantFor(principalOf(request), asked);
    // A sandbox from a snapshot runs the snapshot's image (the SDK fills it in from the snapshot).
    if (spec.image === undefined && spec.template === undefined && spec.fromSnapshot === undefined) {
      if (ctx.defaults.template !== undefined) spec.template = ctx.defaults.template;
      else spec.image = ctx.defaults.image;
    }
  };
}
