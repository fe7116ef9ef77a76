import { describe, expect, it } from 'vitest';
import {
  type EgressTarget,
  egressChain,
  egressChainRules,
  egressJumps,
  egressNatRules,
  egressRestoreScript,
} from './egress-rules.js';

const target = (egress: EgressTarget['egress']): EgressTarget => ({
  jobId: 'Job.With:Odd_chars',
  mac: '02:aa:bb:cc:dd:ee',
  bridge: 'sandstream0',
  subnet: '172.30.0.0/16',
  redis: { address: '172.30.0.1', port: 6379 },
  nameservers: ['10.255.255.53'],
  egress,
});

describe('egress rules', () => {
  it('names a chain iptables accepts for any job id', () => {
    expect(egressChain('x'.repeat(128)).length).toBeLessThanOrEqual(28);
    expect(egressChain('a')).not.toBe(egressChain('b'));
  });

  it('opens Redis, then closes the host and the neighbours before any policy rule', () => {
    for (const egress of ['internet', 'none', { allow: ['10.0.0.0/8'] }] satisfies Parameters<
      typeof target
    >[0][]) {
      const rules = egressChainRules(target(egress));
      expect(rules[0]).toMatch(/ESTABLISHED,RELATED -j RETURN/);
      expect(rules[1]).toBe('-d 172.30.0.1/32 -p tcp --dport 6379 -j RETURN');
      expect(rules[2]).toMatch(/--dst-type LOCAL -p tcp -j REJECT/);
      expect(rules[4]).toMatch(/-d 172.30.0.0\/16 -p tcp -j REJECT/);
      // Nothing is ever accepted outright: what follows the chain still decides.
      expect(rules.some((r) => r.includes('ACCEPT'))).toBe(false);
    }
  });

  it("opens the agent's collector, its address and port only, beside Redis", () => {
    const rules = egressChainRules({ ...target('none'), collector: { address: '10.9.8.7', port: 4318 } });
    expect(rules[2]).toBe('-d 10.9.8.7/32 -p tcp --dport 4318 -j RETURN');
    expect(rules[3]).toMatch(/--dst-type LOCAL -p tcp -j REJECT/);
    expect(rules.filter((r) => r.includes('10.9.8.7'))).toHaveLength(1);
  });

  it('internet rejects private and link-local ranges but lets the name servers answer; none and allow end in a reject', () => {
    const internet = egressChainRules(target('internet'));
    expect(internet).toContain('-d 10.255.255.53/32 -p udp --dport 53 -j RETURN');
    expect(internet).toContain('-d 169.254.0.0/16 -p tcp -j REJECT --reject-with tcp-reset');
    expect(internet.at(-1)).toBe('-j RETURN');
    expect(egressChainRules(target('none')).at(-1)).toMatch(
      /^ -j REJECT|^-j REJECT|REJECT --reject-with icmp/,
    );
    const allow = egressChainRules(target({ allow: ['203.0.113.7:443', '10.1.0.0/16'] }));
    expect(allow).toContain('-d 203.0.113.7/32 -p tcp --dport 443 -j RETURN');
    expect(allow).toContain('-d 10.1.0.0/16 -j RETURN');
    expect(allow.at(-1)).toMatch(/REJECT/);
  });

  it('jumps from DOCKER-USER, INPUT and nat PREROUTING by MAC on the bridge, in one restore transaction', () => {
    const jumps = egressJumps(target('none'));
    expect(jumps.map((j) => j.hook)).toEqual(['DOCKER-USER', 'INPUT', 'PREROUTING']);
    expect(jumps[0]?.rule).toMatch(
      /^-i sandstream0 -m mac --mac-source 02:aa:bb:cc:dd:ee -m comment --comment "sandstream-egress Job.With:Odd_chars" -j SSE-/,
    );
    const script = egressRestoreScript(target('none'), true);
    expect(script.startsWith('*filter\n:SSE-')).toBe(true);
    expect(script.trim().endsWith('COMMIT')).toBe(true);
    expect(script).toContain('*nat\n:SSE-');
    expect(egressRestoreScript(target('none'), false)).not.toMatch(/-I (DOCKER-USER|INPUT|PREROUTING)/);
  });

  it('with domains, redirects 80 and 443 to the proxy but for its own ranges, and lets only redirected traffic reach it', () => {
    const withProxy = {
      ...target({ allow: ['example.com', '203.0.113.7:443'] }),
      proxy: { http: 4080, tls: 4443 },
    };
    expect(egressNatRules(withProxy)).toEqual([
      '-d 203.0.113.7/32 -p tcp --dport 443 -j RETURN',
      '-p tcp --dport 80 -j REDIRECT --to-ports 4080',
      '-p tcp --dport 443 -j REDIRECT --to-ports 4443',
    ]);
    const rules = egressChainRules(withProxy);
    const toProxy = rules.findIndex((r) => r.includes('--ctstate DNAT --ctorigdstport 443'));
    expect(rules[toProxy]).toMatch(/--dst-type LOCAL --dport 4443 -j RETURN$/);
    expect(toProxy).toBeLessThan(rules.findIndex((r) => r.includes('--dst-type LOCAL -p tcp -j REJECT')));
    expect(egressNatRules(target({ allow: ['10.0.0.0/8'] }))).toEqual([]);
  });
});
