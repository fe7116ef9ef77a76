import { allowEntries } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { allowedRanges, upstreamAddress } from './egress-destination.js';

const none = new Set<string>();
const ranges = (...allow: string[]) => allowedRanges(allowEntries({ allow: ['example.com', ...allow] }));

describe('upstreamAddress (the egress proxy, IPv4 and IPv6)', () => {
  it('takes the first public address of either family', () => {
    expect(upstreamAddress(['10.0.0.1', '93.184.216.34'], ranges(), none)).toBe('93.184.216.34');
    expect(upstreamAddress(['2606:2800:220:1::1'], ranges(), none)).toBe('2606:2800:220:1::1');
    expect(upstreamAddress(['192.168.1.1', '2606:2800:220:1::1'], ranges(), none)).toBe('2606:2800:220:1::1');
  });

  it('never an IPv6 loopback, link-local, unique-local (metadata), mapped IPv4 or documentation address', () => {
    for (const address of [
      '::1',
      'fe80::1',
      'fd00:ec2::254',
      'fc00::7',
      '::ffff:10.0.0.1',
      '::ffff:169.254.169.254',
      '2001:db8::1',
      'ff02::1',
      '::',
    ])
      expect(upstreamAddress([address], ranges(), none), address).toBeUndefined();
    expect(upstreamAddress(['169.254.169.254', '127.0.0.1', '172.17.0.1'], ranges(), none)).toBeUndefined();
  });

  it('a private address of either family when the allow-list names its range', () => {
    expect(upstreamAddress(['fd00::5'], ranges('fd00::/64'), none)).toBe('fd00::5');
    expect(upstreamAddress(['fd01::5'], ranges('fd00::/64'), none)).toBeUndefined();
    expect(upstreamAddress(['10.1.2.3'], ranges('10.1.0.0/16:443'), none)).toBe('10.1.2.3');
  });

  it('never one of the host own addresses, even public or allowed', () => {
    const local = new Set(['2606:2800:220:1::1', 'fd00::2']);
    expect(upstreamAddress(['2606:2800:220:1::1'], ranges(), local)).toBeUndefined();
    expect(upstreamAddress(['fd00::2', 'fd00::3'], ranges('fd00::/64'), local)).toBe('fd00::3');
  });
});
