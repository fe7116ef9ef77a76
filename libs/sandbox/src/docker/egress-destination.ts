import { BlockList, isIP } from 'node:net';
import type { EgressAllowEntry } from '@sandstream/wire';
import { NON_PUBLIC_IPV4, NON_PUBLIC_IPV6 } from '../ip-ranges.js';

/**
 * Address ranges by family. Two lists, not one: a BlockList matches an IPv4 address against IPv6
 * rules through its mapped form, so `::ffff:0:0/96` in a shared list would hold every IPv4 address.
 */
export interface Ranges {
  ipv4: BlockList;
  ipv6: BlockList;
}

function rangesOf(list: Array<{ address: string; prefix: number; family: 4 | 6 }>): Ranges {
  const ranges = { ipv4: new BlockList(), ipv6: new BlockList() };
  for (const r of list) {
    const type = r.family === 4 ? 'ipv4' : 'ipv6';
    ranges[type].addSubnet(r.address, r.prefix, type);
  }
  return ranges;
}

/** Every address `internet` never reaches, both families. */
const nonPublic = rangesOf(
  [...NON_PUBLIC_IPV4, ...NON_PUBLIC_IPV6].map((range) => {
    const [address, prefix] = range.split('/') as [string, string];
    return { address, prefix: Number(prefix), family: isIP(address) === 6 ? 6 : 4 };
  }),
);

/** An allow-list's own ranges (IPv4 and IPv6): a name resolving into one of them may be reached. */
export function allowedRanges(entries: EgressAllowEntry[]): Ranges {
  return rangesOf(entries.flatMap((e) => (e.kind === 'cidr' ? [e] : [])));
}

/**
 * The address the egress proxy (a host process) connects to for a sandbox's allowed name: the
 * first of `addresses` that is public or inside the allow-list's own ranges, and never one of the
 * host's own (`local`). IPv4 and IPv6 alike: the proxy dials IPv6 upstreams from the host even
 * though the sandbox itself has IPv4 only (docs/sandbox-backends.md, "Egress rules").
 */
export function upstreamAddress(
  addresses: string[],
  ranges: Ranges,
  local: ReadonlySet<string>,
): string | undefined {
  return addresses.find((address) => {
    const family = isIP(address);
    if (family === 0 || local.has(address)) return false;
    const type = family === 4 ? 'ipv4' : 'ipv6';
    return !nonPublic[type].check(address, type) || ranges[type].check(address, type);
  });
}
