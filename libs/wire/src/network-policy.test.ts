import { describe, expect, it } from 'vitest';
import {
  allowEntries,
  egressOf,
  parseEgressAllowEntry,
  refusedEgressUpdate,
  SpecNetworkSchema,
} from './network-policy.js';

describe('spec.network egress policy', () => {
  it('keeps the string forms: default is internet, deny-egress is none', () => {
    expect(egressOf(SpecNetworkSchema.parse('default'))).toBe('internet');
    expect(egressOf(SpecNetworkSchema.parse('deny-egress'))).toBe('none');
    expect(egressOf(SpecNetworkSchema.parse({ egress: 'none' }))).toBe('none');
    expect(egressOf(SpecNetworkSchema.parse({ egress: 'internet' }))).toBe('internet');
  });

  it('parses CIDRs, addresses with ports and domains', () => {
    const egress = egressOf(
      SpecNetworkSchema.parse({
        egress: {
          allow: ['10.1.0.0/16', '203.0.113.7:443', '[2001:db8::/32]:8443', 'Example.COM', '*.npmjs.org'],
        },
      }),
    );
    expect(allowEntries(egress ?? 'none')).toEqual([
      { kind: 'cidr', family: 4, address: '10.1.0.0', prefix: 16 },
      { kind: 'cidr', family: 4, address: '203.0.113.7', prefix: 32, port: 443 },
      { kind: 'cidr', family: 6, address: '2001:db8::', prefix: 32, port: 8443 },
      { kind: 'domain', domain: 'example.com', wildcard: false },
      { kind: 'domain', domain: 'npmjs.org', wildcard: true },
    ]);
  });

  it('refuses bad entries naming the entry and the rule', () => {
    expect(parseEgressAllowEntry('10.0.0.0/33')).toMatch(/prefix length must be 0-32/);
    expect(parseEgressAllowEntry('10.0.0.1:70000')).toMatch(/port must be between 1 and 65535/);
    expect(parseEgressAllowEntry('example.com:22')).toMatch(/ports 80 and 443 only/);
    expect(parseEgressAllowEntry('not a host')).toMatch(/is not a CIDR/);
    const result = SpecNetworkSchema.safeParse({ egress: { allow: ['10.0.0.0/33'] } });
    expect(result.success).toBe(false);
    expect(JSON.stringify(result.error?.issues)).toMatch(/prefix length/);
    expect(SpecNetworkSchema.safeParse({ egress: { allow: [] } }).success).toBe(false);
    expect(SpecNetworkSchema.safeParse({ egress: 'open' }).success).toBe(false);
    expect(SpecNetworkSchema.safeParse({ egress: 'none', extra: 1 }).success).toBe(false);
  });

  it("a running sandbox may only narrow its template's policy, as create may", () => {
    const allow = { allow: ['10.0.0.0/8'] };
    expect(refusedEgressUpdate('internet', allow)).toBeUndefined();
    expect(refusedEgressUpdate('internet', 'internet')).toBeUndefined();
    expect(refusedEgressUpdate(allow, 'none')).toBeUndefined();
    expect(refusedEgressUpdate(allow, { allow: ['10.0.0.0/8'] })).toBeUndefined();
    expect(refusedEgressUpdate(allow, 'internet')).toContain('the template sets egress allow [10.0.0.0/8]');
    expect(refusedEgressUpdate('none', { allow: ['10.0.0.0/8'] })).toContain('may only narrow');
    expect(refusedEgressUpdate(allow, { allow: ['10.0.0.0/8', '192.168.0.0/16'] })).toContain(
      'network.egress',
    );
  });
});
