import { dumpYaml, type V1NetworkPolicy } from '@kubernetes/client-node';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { canonicalCidr, NON_PUBLIC_IPV4, NON_PUBLIC_IPV6 } from '../ip-ranges.js';
import { proxyAccessOf } from './egress-proxy-access.js';
import {
  buildEgressPolicy,
  kubernetesEgressRefusal,
  REDIS_ENDPOINT_ANNOTATION,
  redisUrlOfPolicy,
} from './network-policy-builder.js';

const base = { podName: 'sbx-job-1-abc', namespace: 'sandboxes', jobId: 'job-1', tenant: 'acme' };
const dnsRule = {
  to: [
    {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
      podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
    },
  ],
  ports: [
    { protocol: 'UDP', port: 53 },
    { protocol: 'TCP', port: 53 },
  ],
};

/** The policy as the client sends it (`_from` becomes `from`), checked against the Kubernetes schema. */
function wire(policy: V1NetworkPolicy): {
  metadata: V1NetworkPolicy['metadata'];
  spec: Record<string, unknown>;
} {
  const sent = parse(dumpYaml(policy));
  expect(() => new NetworkPolicy(sent).validate()).not.toThrow();
  return sent;
}

describe('buildEgressPolicy', () => {
  it('none to a Redis service name: Redis pods on the URL port plus cluster DNS, ingress only from the given peers', () => {
    const api = [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'api' } } }];
    const policy = wire(
      buildEgressPolicy({
        ...base,
        redisUrl: 'redis://redis.sandstream.svc:6380',
        egress: 'none',
        ingressPeers: api,
      }),
    );
    expect(policy.metadata).toMatchObject({ name: 'sbx-job-1-abc-egress', namespace: 'sandboxes' });
    expect(policy.metadata?.labels).toMatchObject({
      'sandstream.dev/job-id': 'job-1',
      'app.kubernetes.io/managed-by': 'sandstream',
    });
    expect(policy.metadata?.annotations?.[REDIS_ENDPOINT_ANNOTATION]).toBe('redis.sandstream.svc:6380');
    expect(policy.spec).toEqual({
      podSelector: { matchLabels: { 'sandstream.dev/sandbox': 'sbx-job-1-abc' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [{ from: api }],
      egress: [
        {
          to: [
            { namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'redis' } } },
          ],
          ports: [{ protocol: 'TCP', port: 6380 }],
        },
        dnsRule,
      ],
    });
  });

  it('none to a Redis IP: one ipBlock rule, no DNS, no ingress', () => {
    const policy = wire(buildEgressPolicy({ ...base, redisUrl: 'redis://10.0.0.7', egress: 'none' }));
    expect(policy.spec.ingress).toEqual([]);
    expect(policy.spec.egress).toEqual([
      { to: [{ ipBlock: { cidr: '10.0.0.7/32' } }], ports: [{ protocol: 'TCP', port: 6379 }] },
    ]);
  });

  it('internet: Redis, DNS, then every public IPv4 and IPv6 address, never private, link-local or metadata ranges', () => {
    const policy = wire(
      buildEgressPolicy({ ...base, redisUrl: 'redis://10.0.0.7:6379', egress: 'internet' }),
    );
    expect(policy.spec.egress).toEqual([
      { to: [{ ipBlock: { cidr: '10.0.0.7/32' } }], ports: [{ protocol: 'TCP', port: 6379 }] },
      dnsRule,
      {
        to: [
          {
            ipBlock: {
              cidr: '0.0.0.0/0',
              except: NON_PUBLIC_IPV4,
            },
          },
          {
            ipBlock: {
              cidr: '::/0',
              except: NON_PUBLIC_IPV6,
            },
          },
        ],
      },
    ]);
  });

  it('allow: ranges of any port in one rule, then one rule per port (TCP and UDP), canonical and without repeats', () => {
    const policy = wire(
      buildEgressPolicy({
        ...base,
        redisUrl: 'redis://[fd00::7]:6390',
        egress: {
          allow: [
            '203.0.113.7',
            '10.1.2.3/16:5432',
            '198.51.100.0/24',
            '[2001:db8::1/32]:443',
            '10.1.0.0/16:5432',
          ],
        },
      }),
    );
    expect(policy.metadata?.annotations?.[REDIS_ENDPOINT_ANNOTATION]).toBe('[fd00::7]:6390');
    expect(policy.spec.egress).toEqual([
      { to: [{ ipBlock: { cidr: 'fd00::7/128' } }], ports: [{ protocol: 'TCP', port: 6390 }] },
      { to: [{ ipBlock: { cidr: '203.0.113.7/32' } }, { ipBlock: { cidr: '198.51.100.0/24' } }] },
      {
        to: [{ ipBlock: { cidr: '10.1.0.0/16' } }],
        ports: [
          { protocol: 'TCP', port: 5432 },
          { protocol: 'UDP', port: 5432 },
        ],
      },
      {
        to: [{ ipBlock: { cidr: '2001:db8::/32' } }],
        ports: [
          { protocol: 'TCP', port: 443 },
          { protocol: 'UDP', port: 443 },
        ],
      },
    ]);
  });

  it('uses operator-given peers and the owner references it is given', () => {
    const policy = wire(
      buildEgressPolicy({
        ...base,
        redisUrl: 'rediss://:pw@redis:6379',
        egress: 'none',
        redisPeers: [{ podSelector: { matchLabels: { app: 'my-redis' } } }],
        dnsPeers: [{ ipBlock: { cidr: '169.254.20.10/32' } }],
        ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: 'sbx-job-1-abc', uid: 'uid-1' }],
      }),
    );
    const egress = policy.spec.egress as Array<{ to: unknown }>;
    expect(egress[0]?.to).toEqual([{ podSelector: { matchLabels: { app: 'my-redis' } } }]);
    expect(egress[1]?.to).toEqual([{ ipBlock: { cidr: '169.254.20.10/32' } }]);
    expect(policy.metadata?.ownerReferences).toEqual([
      { apiVersion: 'v1', kind: 'Pod', name: 'sbx-job-1-abc', uid: 'uid-1' },
    ]);
    // The password never lands on the policy; the endpoint does, for a later update.
    expect(JSON.stringify(policy)).not.toContain('pw');
    expect(redisUrlOfPolicy(policy)).toBe('redis://redis:6379');
  });

  it('refuses domain entries without the egress proxy, naming the entry and why', () => {
    const egress = { allow: ['10.0.0.0/8', 'example.com'] };
    expect(kubernetesEgressRefusal(egress, 'spec.network', 'missing')).toMatch(
      /^spec\.network\.egress\.allow\[1\] "example\.com": domain entries need the egress proxy \(the backend option egressProxy\), and none is configured/,
    );
    expect(kubernetesEgressRefusal(egress, 'network', 'not-in-pod')).toMatch(
      /^network\.egress\.allow\[1\] "example\.com": domain entries go through the egress proxy, and this sandbox was started without it/,
    );
    expect(kubernetesEgressRefusal(egress, 'network', 'ready')).toBeUndefined();
    expect(kubernetesEgressRefusal({ allow: ['10.0.0.0/8'] }, 'network', 'missing')).toBeUndefined();
    expect(() => buildEgressPolicy({ ...base, redisUrl: 'redis://10.0.0.7', egress })).toThrow(
      /network\.egress\.allow\[1\]/,
    );
  });

  it('domains: the proxy pods on the proxy port (and DNS for its name) besides the CIDRs; the token hash and policy for the proxy', () => {
    const proxyPeers = [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'egress-proxy' } } }];
    const egress = { allow: ['example.com', '203.0.113.0/24', '*.pkg.dev'] };
    const policy = wire(
      buildEgressPolicy({
        ...base,
        redisUrl: 'redis://10.0.0.7',
        egress,
        proxy: { peers: proxyPeers, port: 3128, needsDns: true, tokenSha256: 'ab'.repeat(32) },
      }),
    );
    expect(policy.spec.egress).toEqual([
      { to: [{ ipBlock: { cidr: '10.0.0.7/32' } }], ports: [{ protocol: 'TCP', port: 6379 }] },
      dnsRule,
      { to: proxyPeers, ports: [{ protocol: 'TCP', port: 3128 }] },
      { to: [{ ipBlock: { cidr: '203.0.113.0/24' } }] },
    ]);
    expect(proxyAccessOf(policy as V1NetworkPolicy)).toEqual({ tokenSha256: 'ab'.repeat(32), egress });

    // The same sandbox narrowed to CIDRs keeps its token and the proxy (its pod still sends its
    // HTTP clients there; the proxy follows the narrowed policy); `none` drops the proxy too.
    const narrowed = wire(
      buildEgressPolicy({
        ...base,
        redisUrl: 'redis://10.0.0.7',
        egress: { allow: ['203.0.113.0/24'] },
        proxy: { peers: proxyPeers, port: 3128, needsDns: false, tokenSha256: 'ab'.repeat(32) },
      }),
    );
    expect(narrowed.spec.egress).toEqual([
      { to: [{ ipBlock: { cidr: '10.0.0.7/32' } }], ports: [{ protocol: 'TCP', port: 6379 }] },
      { to: proxyPeers, ports: [{ protocol: 'TCP', port: 3128 }] },
      { to: [{ ipBlock: { cidr: '203.0.113.0/24' } }] },
    ]);
    const none = wire(
      buildEgressPolicy({
        ...base,
        redisUrl: 'redis://10.0.0.7',
        egress: 'none',
        proxy: { peers: proxyPeers, port: 3128, needsDns: true, tokenSha256: 'ab'.repeat(32) },
      }),
    );
    expect(none.spec.egress).toEqual([
      { to: [{ ipBlock: { cidr: '10.0.0.7/32' } }], ports: [{ protocol: 'TCP', port: 6379 }] },
    ]);
    expect(proxyAccessOf(none as V1NetworkPolicy)?.egress).toBe('none');
    expect(proxyAccessOf(narrowed as V1NetworkPolicy)?.egress).toEqual({ allow: ['203.0.113.0/24'] });
  });
});

describe('canonicalCidr', () => {
  it('clears the host bits of IPv4 and IPv6 ranges', () => {
    expect(canonicalCidr('10.1.2.3', 16)).toBe('10.1.0.0/16');
    expect(canonicalCidr('255.255.255.255', 0)).toBe('0.0.0.0/0');
    expect(canonicalCidr('203.0.113.7', 32)).toBe('203.0.113.7/32');
    expect(canonicalCidr('192.168.1.129', 25)).toBe('192.168.1.128/25');
    expect(canonicalCidr('2001:db8:0:0:1::1', 64)).toBe('2001:db8::/64');
    expect(canonicalCidr('2001:0db8:0000:0001:0000:0000:0000:0001', 128)).toBe('2001:db8:0:1::1/128');
    expect(canonicalCidr('::ffff:10.1.2.3', 120)).toBe('::ffff:a01:200/120');
    expect(canonicalCidr('fe80::1', 10)).toBe('fe80::/10');
  });
});
