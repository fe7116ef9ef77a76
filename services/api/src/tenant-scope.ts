import { randomUUID } from 'node:crypto';
import { isScopedJobId, maxUserIdLength, scopedJobId, userJobId } from '@sandstream/bus';
import type { FastifyContextConfig, FastifyRequest } from 'fastify';
import { principalOf } from './access.js';
import { tenantFor } from './principal.js';
import { HttpProblem } from './problem.js';

/**
 * Where the API turns the ids its users see into the internal ids everything below it uses, and
 * back (libs/bus tenant-ids.ts makes the internal form): a route's `:id` is resolved in the
 * caller's tenant before anything reads it (so another tenant's record is simply not there), a
 * created record's id is made in its tenant, and every record it answers with shows its user's id.
 */

/** An admin names the tenant whose ids a request's `:id` means (default: the key's own tenant). */
export const TENANT_HEADER = 'x-sandstream-tenant';

/** The tenant whose ids a request names: the key's, or for an admin key, the one TENANT_HEADER names. */
export function idTenant(request: FastifyRequest): string {
  const asked = request.headers[TENANT_HEADER];
  return tenantFor(principalOf(request), typeof asked === 'string' ? asked : undefined);
}

/** The internal id of a user's id in `tenant`; a reserved or over-long id is refused by field. */
export function internalId(tenant: string, id: string, field: string): string {
  if (isScopedJobId(id))
    throw new HttpProblem(400, 'invalid-request', `${field}: the form t.<16 letters>.… is reserved`, [
      { field, rule: 'must not start with "t." and 16 letters or digits and "." (internal ids)' },
    ]);
  const max = maxUserIdLength(tenant);
  if (id.length > max)
    throw new HttpProblem(400, 'invalid-request', `${field} is at most ${max} characters`, [
      { field, rule: `at most ${max} characters` },
    ]);
  return scopedJobId(tenant, id);
}

/** Whether a route's `:id` names a sandbox or job record (its ownership is checked or prefetched). */
export function namesRecord(config: FastifyContextConfig): boolean {
  return config.access !== undefined || config.checkedByCommand === true || config.prefetch !== undefined;
}

/** Resolves the route's `:id` in the caller's tenant: `params.id` becomes the internal id. */
export function scopeRouteId(request: FastifyRequest): void {
  const params = request.params as { id?: unknown } | undefined;
  if (!params || typeof params.id !== 'string') return;
  params.id = internalId(idTenant(request), params.id, 'params.id');
}

/** A spec's id (given, or made here) as an internal id of its tenant, before it is validated. */
export function scopeSpecId(spec: Record<string, unknown>): void {
  if (typeof spec.tenant !== 'string') return;
  if (spec.id === undefined) spec.id = randomUUID();
  if (typeof spec.id === 'string') spec.id = internalId(spec.tenant, spec.id, 'body.id');
}

/** `{ spec }` with the spec's id as its user knows it, when the value has a spec with an id. */
function userSpecOf(value: object): { spec?: object } {
  const spec = (value as { spec?: unknown }).spec;
  return spec !== null && typeof spec === 'object' && typeof (spec as { id?: unknown }).id === 'string'
    ? { spec: { ...spec, id: userJobId((spec as { id: string }).id) } }
    : {};
}

/** A record as its user sees it: its id (and its spec's) the user's, never the internal one. */
export function withUserId<T extends { id: string }>(record: T): T {
  return { ...record, id: userJobId(record.id), ...userSpecOf(record) };
}

/** A snapshot as its user sees it: the sandbox it was taken of (and its spec's id) by the user's id. */
export function snapshotWithUserIds<T extends { fromSandbox: string }>(snapshot: T): T {
  return { ...snapshot, fromSandbox: userJobId(snapshot.fromSandbox), ...userSpecOf(snapshot) };
}
