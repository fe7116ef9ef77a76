import { BlockList } from 'node:net';
import { describe, expect, it } from 'vitest';
import { NON_PUBLIC_IPV4, NON_PUBLIC_IPV6 } from './ip-ranges.js';

/**
 * The one place the ranges themselves are checked: every other test imports them (the Docker
 * firewall, the NetworkPolicy, the egress proxies), so a range dropped here must fail here.
 */
function listOf(ranges: string[], type: 'ipv4' | 'ipv6'): BlockList {
  const list = new BlockList();
  for (const range of ranges) {
    const [address, prefix] = range.split('/') as [string, string];
    list.addSubnet(address, Number(prefix), type);
  }
  return list;
}

describe('non-public ranges', () => {
  const v4 = listOf(NON_PUBLIC_IPV4, 'ipv4');
  const v6 = listOf(NON_PUBLIC_IPV6, 'ipv6');

  it('hold the host, private networks, link-local metadata, CGNAT, multicast and reserved IPv4', () => {
    for (const address of [
      '0.0.0.0',
      '10.1.2.3',
      '100.64.0.1',
      '127.0.0.1',
      '169.254.169.254',
      '172.16.0.1',
      '172.31.255.255',
      '192.168.1.1',
      '224.0.0.251',
      '255.255.255.255',
    ])
      expect(v4.check(address, 'ipv4'), address).toBe(true);
    for (const address of ['1.1.1.1', '8.8.8.8', '172.32.0.1', '198.19.0.2', '203.0.113.7'])
      expect(v4.check(address, 'ipv4'), address).toBe(false);
  });

  it('hold loopback, mapped IPv4, unique-local (a cloud metadata address), link-local and multicast IPv6', () => {
    for (const address of [
      '::',
      '::1',
      '::ffff:10.0.0.1',
      'fd00:ec2::254',
      'fe80::1',
      'ff02::1',
      '2001:db8::1',
    ])
      expect(v6.check(address, 'ipv6'), address).toBe(true);
    for (const address of ['2606:4700:4700::1111', '2001:4860:4860::8888'])
      expect(v6.check(address, 'ipv6'), address).toBe(false);
  });
});
