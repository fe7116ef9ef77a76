import { createHash } from 'node:crypto';

/**
 * Ids are scoped per tenant: two tenants of the HTTP API may both have `my-sandbox`. Below the
 * API (job records, Redis keys, ACL users, container and pod names, queues) a record is named by
 * its internal id, made here from the tenant and the user's id; the API answers with the user's
 * id only.
 *
 * - Tenant `default` (anonymous loopback, and everything the SDK and CLI make over Redis, which
 *   has no tenant of its own): the internal id is the id itself, today's ids, so seed 000's
 *   `sandbox:smoke-test:*` keys and plain SDK ids work as they always did.
 * - Any other tenant: `t.<tag>.<id>`, where `<tag>` is the first 16 base32 characters (80 bits)
 *   of SHA-256 of the tenant's name. Deterministic (every API replica agrees, nothing is stored),
 *   short (19 characters before the id), collision-resistant (two tenants share a tag with odds
 *   of 2^-80 a pair) and reversible: the user's id is what follows the prefix, so a list shows it
 *   without a lookup. Tags use lower-case letters and digits 2-7 and the dots that JobIdSchema
 *   allows, so the internal id is itself a valid job id, Redis key part and ACL pattern.
 *
 * The prefix form is reserved: the API refuses a user id that has it, so a plain id of tenant
 * `default` can never be another tenant's internal id.
 */
const TAG_CHARS = 16;
const PREFIX_LENGTH = 2 + TAG_CHARS + 1;
const SCOPED = /^t\.[a-z2-7]{16}\./;
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** The tenant whose ids are today's plain ids. */
export const PLAIN_ID_TENANT = 'default';

/** The longest internal id (JobIdSchema's bound). */
const MAX_INTERNAL = 128;

function base32(bytes: Buffer, chars: number): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const byte of bytes) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < chars) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
    if (out.length >= chars) break;
  }
  return out;
}

/**
 * Tags already computed: every request on a sandbox scopes its id (a SHA-256 each time was a
 * measurable part of a proxied preview request). Bounded: a process sees few tenants, and past
 * the bound the memory starts again.
 */
const knownTags = new Map<string, string>();
const KNOWN_TAGS_MAX = 10_000;

/** The tenant's tag (16 base32 characters); '' for `default`, whose ids carry none. */
export function tenantTag(tenant: string): string {
  if (tenant === PLAIN_ID_TENANT) return '';
  const known = knownTags.get(tenant);
  if (known !== undefined) return known;
  const tag = base32(createHash('sha256').update(tenant, 'utf8').digest(), TAG_CHARS);
  if (knownTags.size >= KNOWN_TAGS_MAX) knownTags.clear();
  knownTags.set(tenant, tag);
  return tag;
}

/** `t.<tag>.` for a tenant other than `default`; '' for `default`. */
export function tenantIdPrefix(tenant: string): string {
  const tag = tenantTag(tenant);
  return tag === '' ? '' : `t.${tag}.`;
}

/** The internal id of the tenant's `id`. */
export function scopedJobId(tenant: string, id: string): string {
  return `${tenantIdPrefix(tenant)}${id}`;
}

/** The user's id of an internal id (a plain id is its own). */
export function userJobId(internalId: string): string {
  return internalId.replace(SCOPED, '');
}

/** Whether `id` has the reserved form of a tenant-scoped internal id. */
export function isScopedJobId(id: string): boolean {
  return SCOPED.test(id);
}

/** The longest user id a tenant may use, so that its internal id stays a valid job id. */
export function maxUserIdLength(tenant: string): number {
  return tenant === PLAIN_ID_TENANT ? MAX_INTERNAL : MAX_INTERNAL - PREFIX_LENGTH;
}

/** Replaces every tenant-scoped internal id in a text (an error message) by its user's id. */
export function withUserIds(text: string): string {
  return text.replace(/(^|[^A-Za-z0-9._:-])t\.[a-z2-7]{16}\./g, '$1');
}
