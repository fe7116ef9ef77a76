import { createHash } from 'node:crypto';
import { userJobId } from './tenant-ids.js';

/** The longest label: a DNS label holds 63, and `{port}-` (up to 6) goes before it. */
export const PREVIEW_LABEL_MAX = 50;

/**
 * The DNS-safe name a sandbox's host-form preview URL carries (`{port}-{label}.{domain}`):
 * lowercase letters, digits and `-`, at most 50 characters, unique across tenants. A sandbox id
 * may hold capitals, `.`, `_`, `:` and 128 characters, and two tenants may use the same id, so
 * the readable part (the id folded to `[a-z0-9-]`, cut to 36) is followed by 12 hex characters
 * of a SHA-256 over tenant and id: `My_App.1` of tenant `acme` → `my-app-1-3f9c…`. The one
 * function that derives it: the API (resolving a Host) and both SDK transports use it.
 */
export function previewLabel(tenant: string, sandboxId: string): string {
  // The readable part is the id its user gave (not the tenant-scoped internal one, tenant-ids.ts).
  const readable =
    userJobId(sandboxId)
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .slice(0, 36)
      .replace(/^-+|-+$/g, '') || 'sandbox';
  const digest = createHash('sha256').update(`${tenant}\u0000${sandboxId}`).digest('hex').slice(0, 12);
  return `${readable}-${digest}`;
}

/** `{port}-{label}` of a host-form preview (the part before the domain), or undefined. */
export function parsePreviewHost(
  host: string | undefined,
  domain: string,
): { port: number; label: string } | undefined {
  if (!host) return undefined;
  const name = host.toLowerCase().replace(/:\d{1,5}$/, '');
  const suffix = `.${domain.toLowerCase()}`;
  if (!name.endsWith(suffix)) return undefined;
  const head = name.slice(0, -suffix.length);
  const match = /^(\d{1,5})-([a-z0-9-]{1,50})$/.exec(head) ?? e2bHostForm(head);
  if (!match) return undefined;
  const port = Number(match[1]);
  return port >= 1 && port <= 65535 ? { port, label: match[2] as string } : undefined;
}

/**
 * E2B's SDK makes a port's host as `{port}-{sandboxId}.{domain}` from the domain the sandbox's
 * create answer names (previewDomainForE2b): `{port}-{readable}.{digest}`, the same label with
 * its last `-` a `.`. Answers [whole, port, label] as the regex above does.
 */
function e2bHostForm(head: string): [string, string, string] | undefined {
  const match = /^(\d{1,5})-([a-z0-9-]{1,36})\.([0-9a-f]{12})$/.exec(head);
  return match ? [head, match[1] as string, `${match[2]}-${match[3]}`] : undefined;
}

/**
 * The `domain` an E2B create answer names so that the SDK's `getHost(port)` is this sandbox's
 * host-form preview: its label's digest under the preview domain. Undefined when the id does not
 * fold to itself (capitals, `.`, more than 36 characters), as no such host could name it.
 */
export function previewDomainForE2b(tenant: string, sandboxId: string, domain: string): string | undefined {
  const label = previewLabel(tenant, sandboxId);
  const digestAt = label.length - 12;
  if (label.slice(0, digestAt - 1) !== userJobId(sandboxId)) return undefined;
  return `${label.slice(digestAt)}.${domain}`;
}
