import { isIP } from 'node:net';
import * as z from 'zod';
import { strictObject } from './unknown-keys.js';

/** Most entries one allow-list may hold: each is a firewall rule on every packet's path. */
export const EGRESS_ALLOW_MAX = 64;

/** One allow-list entry, parsed: an address range (with or without a port) or a domain name. */
export type EgressAllowEntry =
  | { kind: 'cidr'; family: 4 | 6; address: string; prefix: number; port?: number }
  | { kind: 'domain'; domain: string; wildcard: boolean };

const DOMAIN = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * `10.0.0.0/8`, `203.0.113.7`, `203.0.113.7:443`, `10.1.0.0/16:5432`, `[2001:db8::/32]:443`,
 * `2001:db8::/32`, `example.com`, `*.example.com`. Returns the reason when the text is none of them.
 */
export function parseEgressAllowEntry(text: string): EgressAllowEntry | string {
  let rest = text.trim();
  let port: number | undefined;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(rest);
  if (bracketed) {
    rest = bracketed[1] as string;
    if (bracketed[2] !== undefined) port = Number(bracketed[2]);
  } else if (!rest.includes('::') && (rest.match(/:/g) ?? []).length === 1) {
    const [host, p] = rest.split(':') as [string, string];
    if (!/^\d+$/.test(p)) return `"${text}": the port after ":" must be a number`;
    rest = host;
    port = Number(p);
  }
  if (port !== undefined && (port < 1 || port > 65535))
    return `"${text}": the port must be between 1 and 65535`;
  const [address, prefixText] = rest.split('/') as [string, string | undefined];
  const family = isIP(address);
  if (family === 4 || family === 6) {
    const max = family === 4 ? 32 : 128;
    const prefix = prefixText === undefined ? max : Number(prefixText);
    if (prefixText !== undefined && (!/^\d+$/.test(prefixText) || prefix > max))
      return `"${text}": the prefix length must be 0-${max} for an IPv${family} range`;
    return { kind: 'cidr', family, address, prefix, ...(port !== undefined ? { port } : {}) };
  }
  const domain = rest.toLowerCase();
  if (prefixText === undefined && domain.length <= 253 && DOMAIN.test(domain)) {
    // Domains are matched by the egress proxy on 80 (Host) and 443 (SNI) only.
    if (port !== undefined && port !== 80 && port !== 443)
      return `"${text}": a domain is matched on ports 80 and 443 only (through the egress proxy)`;
    return { kind: 'domain', domain: domain.replace(/^\*\./, ''), wildcard: domain.startsWith('*.') };
  }
  return `"${text}" is not a CIDR (10.0.0.0/8), an address with a port (203.0.113.7:443) or a domain name (example.com, *.example.com)`;
}

const allowEntry = z
  .string()
  .max(300, 'an egress allow entry is at most 300 characters')
  .superRefine((text, ctx) => {
    const parsed = parseEgressAllowEntry(text);
    if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed });
  });

export const EgressSchema = z.union(
  [
    z.enum(['internet', 'none']),
    strictObject({
      allow: z
        .array(allowEntry)
        .min(1, 'egress.allow must list at least one entry (use egress: "none" to allow nothing)')
        .max(EGRESS_ALLOW_MAX, `egress.allow holds at most ${EGRESS_ALLOW_MAX} entries`),
    }),
  ],
  { error: 'egress must be "internet", "none" or { allow: [CIDR | host:port | domain, …] }' },
);

/**
 * Where a sandbox may connect to (docs/sandbox-backends.md, "Reach"). `internet`: public
 * addresses, never the host, other sandboxes, link-local or private ranges; `none`: only its
 * Redis path; `allow`: only the listed ranges, ports and domains (and its Redis path).
 */
export const NetworkPolicySchema = strictObject({ egress: EgressSchema });
export type NetworkPolicy = z.output<typeof NetworkPolicySchema>;
export type Egress = NetworkPolicy['egress'];

/**
 * spec.network as written: the policy object, or the older strings (`default` = internet,
 * `deny-egress` = none, `none` = no network at all, which Docker and Kubernetes refuse).
 */
export const SpecNetworkSchema = z.union([z.enum(['default', 'none', 'deny-egress']), NetworkPolicySchema], {
  error:
    'network must be "default", "deny-egress" or { egress: "internet" | "none" | { allow: [CIDR | host:port | domain, …] } }',
});
export type SpecNetwork = z.output<typeof SpecNetworkSchema>;

/** The policy a spec.network stands for; undefined for the string `none` (no network at all). */
export function egressOf(network: SpecNetwork): Egress | undefined {
  if (network === 'default') return 'internet';
  if (network === 'deny-egress') return 'none';
  if (network === 'none') return undefined;
  return network.egress;
}

/** The entries of an allow policy, parsed (validated by the schema already). */
export function allowEntries(egress: Egress): EgressAllowEntry[] {
  if (typeof egress === 'string') return [];
  return egress.allow.map((text) => {
    const parsed = parseEgressAllowEntry(text);
    if (typeof parsed === 'string') throw new Error(parsed);
    return parsed;
  });
}

/** For messages: `internet`, `none`, or `allow [a, b]`. */
export function describeEgress(egress: Egress): string {
  return typeof egress === 'string' ? egress : `allow [${egress.allow.join(', ')}]`;
}

/**
 * Whether a running sandbox may take `requested` under `ceiling` (its template's policy, or
 * `internet` without one): the rule of create (services/scheduler template-resolver.ts), where a
 * request may only narrow. `none` is always allowed; an allow-list or `internet` only under an
 * `internet` ceiling or when it is the ceiling itself (going back to the template's). Returns the
 * reason when refused.
 */
export function refusedEgressUpdate(ceiling: Egress | undefined, requested: Egress): string | undefined {
  if (requested === 'none' || ceiling === 'internet') return undefined;
  if (ceiling !== undefined && describeEgress(ceiling) === describeEgress(requested)) return undefined;
  const what = ceiling === undefined ? 'no network' : `egress ${describeEgress(ceiling)}`;
  return `network.egress: the template sets ${what}; a running sandbox may only narrow it (to "none" or back to the template's)`;
}
