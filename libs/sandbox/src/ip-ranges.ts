import { isIP } from 'node:net';

/**
 * IPv4 ranges `internet` never reaches (the Docker firewall's rules, a Kubernetes NetworkPolicy's
 * `except`, the egress proxies' upstream check): this network, private, shared (CGNAT),
 * loopback, link-local (169.254.169.254, a cloud's metadata), multicast, reserved.
 */
export const NON_PUBLIC_IPV4 = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '224.0.0.0/4',
  '240.0.0.0/4',
];

/**
 * IPv6 ranges `internet` never reaches, beside NON_PUBLIC_IPV4:
 * unspecified, loopback, IPv4-mapped (an IPv4 private address by another name), local-use NAT64,
 * discard, documentation, unique-local (fd00:ec2::254, a cloud's metadata, sits there),
 * link-local and multicast.
 */
export const NON_PUBLIC_IPV6 = [
  '::/128',
  '::1/128',
  '::ffff:0:0/96',
  '64:ff9b:1::/48',
  '100::/64',
  '2001:db8::/32',
  'fc00::/7',
  'fe80::/10',
  'ff00::/8',
];

function v6ToBigInt(address: string): bigint {
  let text = address;
  // A trailing dotted quad (::ffff:10.0.0.1) is two groups.
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, undefined];
  const headGroups = head ? head.split(':') : [];
  const tailGroups = tail ? tail.split(':') : [];
  const groups =
    tail === undefined
      ? headGroups
      : [...headGroups, ...Array(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  return groups.reduce((n, g) => (n << 16n) | BigInt(Number.parseInt(g || '0', 16)), 0n);
}

function bigIntToV6(n: bigint): string {
  const groups = Array.from({ length: 8 }, (_, i) =>
    Number((n >> BigInt(112 - i * 16)) & 0xffffn).toString(16),
  );
  // The longest run of two or more zero groups becomes "::" (RFC 5952).
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > best.len && j - i >= 2) best = { at: i, len: j - i };
    i = j;
  }
  if (best.at < 0) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}

/**
 * `address/prefix` with the host bits cleared (`10.1.2.3/16` -> `10.1.0.0/16`): the form an API
 * server stores and compares, and the one its validation warns about when it is not given.
 */
export function canonicalCidr(address: string, prefix: number): string {
  const family = isIP(address);
  if (family === 4) {
    const n = address.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
    // Bitwise operators are 32-bit signed: plain arithmetic instead.
    const masked = n - (n % 2 ** (32 - prefix));
    const parts = [24, 16, 8, 0].map((shift) => Math.floor(masked / 2 ** shift) % 256);
    return `${parts.join('.')}/${prefix}`;
  }
  if (family === 6) {
    const bits = 128n - BigInt(prefix);
    const masked = (v6ToBigInt(address) >> bits) << bits;
    return `${bigIntToV6(masked)}/${prefix}`;
  }
  throw new Error(`"${address}" is not an IP address`);
}
