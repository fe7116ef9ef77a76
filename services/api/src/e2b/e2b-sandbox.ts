import type { Sandbox } from '@sandstream/client';
import type { FastifyRequest } from 'fastify';
import { checkAccess, principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { HttpProblem, notFound } from '../problem.js';
import { idTenant, internalId } from '../tenant-scope.js';

/**
 * The sandbox an in-sandbox call names by its `E2b-Sandbox-Id` header, as the caller's tenant
 * knows it: checked as every `:id` route checks it (another tenant's is simply not found), then
 * driven through the same SDK handle the HTTP API's exec and files routes use.
 */
export async function headerSandbox(ctx: ApiContext, request: FastifyRequest): Promise<Sandbox> {
  const raw = request.headers['e2b-sandbox-id'];
  if (typeof raw !== 'string' || raw === '')
    throw new HttpProblem(400, 'invalid-request', 'the E2b-Sandbox-Id header is required', [
      { field: 'headers.e2b-sandbox-id', rule: "the sandbox's id" },
    ]);
  return ownedSandbox(ctx, request, raw, 'headers.e2b-sandbox-id');
}

/** A sandbox by the caller's id for it, once its tenant was checked (404 otherwise). */
export async function ownedSandbox(
  ctx: ApiContext,
  request: FastifyRequest,
  userId: string,
  field: string,
): Promise<Sandbox> {
  const id = internalId(idTenant(request), userId, field);
  const principal = principalOf(request);
  // A sandbox's access token opens that sandbox only: any other is not found, as another tenant's.
  if (principal.sandbox !== undefined && principal.sandbox !== id) throw notFound(`sandbox ${userId}`);
  await checkAccess(ctx, principal, id, 'sandbox');
  return ctx.client.sandboxes.handle(id);
}
