import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { describe, expect, it } from 'vitest';
import { buildEgressPolicy } from './network-policy-builder.js';

const base = { podName: 'sbx-job-1-abc', namespace: 'sandboxes', jobId: 'job-1', tenant: 'acme' };

describe('buildEgressPolicy', () => {
  it('deny-egress to a Redis service name: Redis pods on the URL port plus cluster DNS, no ingress', () => {
    const policy = buildEgressPolicy({
      ...base,
      redisUrl: 'redis://redis.sandstream.svc:6380',
      network: 'deny-egress',
    });
    expect(() => new NetworkPolicy(policy as never).validate()).not.toThrow();
    expect(policy.metadata).toMatchObject({ name: 'sbx-job-1-abc-egress', namespace: 'sandboxes' });
    expect(policy.metadata?.labels).toMatchObject({
      'sandstream.dev/job-id': 'job-1',
      'app.kubernetes.io/managed-by': 'sandstream',
    });
    expect(policy.spec).toEqual({
      podSelector: { matchLabels: { 'sandstream.dev/sandbox': 'sbx-job-1-abc' } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [
        {
          to: [
            { namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'redis' } } },
          ],
          ports: [{ protocol: 'TCP', port: 6380 }],
        },
        {
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
        },
      ],
    });
  });

  it('network none to a Redis IP: one ipBlock rule and no DNS', () => {
    const policy = buildEgressPolicy({ ...base, redisUrl: 'redis://10.0.0.7', network: 'none' });
    expect(() => new NetworkPolicy(policy as never).validate()).not.toThrow();
    expect(policy.spec?.egress).toEqual([
      { to: [{ ipBlock: { cidr: '10.0.0.7/32' } }], ports: [{ protocol: 'TCP', port: 6379 }] },
    ]);
  });

  it('uses operator-given peers and an owner reference in the same namespace', () => {
    const policy = buildEgressPolicy({
      ...base,
      redisUrl: 'rediss://:pw@redis:6379',
      network: 'deny-egress',
      redisPeers: [{ podSelector: { matchLabels: { app: 'my-redis' } } }],
      dnsPeers: [{ ipBlock: { cidr: '169.254.20.10/32' } }],
      owner: { name: 'pod-lifecycle-0', uid: 'uid-1' },
    });
    expect(() => new NetworkPolicy(policy as never).validate()).not.toThrow();
    expect(policy.spec?.egress?.[0]?.to).toEqual([{ podSelector: { matchLabels: { app: 'my-redis' } } }]);
    expect(policy.spec?.egress?.[1]?.to).toEqual([{ ipBlock: { cidr: '169.254.20.10/32' } }]);
    expect(policy.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'Pod',
      name: 'pod-lifecycle-0',
      uid: 'uid-1',
    });
  });
});
