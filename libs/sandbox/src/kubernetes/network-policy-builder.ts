import { isIP } from 'node:net';
import type { V1NetworkPolicy, V1NetworkPolicyPeer } from '@kubernetes/client-node';
import { egressPolicyName } from './kube-names.js';
import type { OwnerPod } from './kubernetes-settings.js';
import { ownerReferencesFor } from './owner-reference.js';
import { identityLabels, SANDBOX_POD_LABEL } from './sandbox-metadata.js';

export interface EgressPolicyInput {
  podName: string;
  namespace: string;
  jobId: string;
  tenant: string;
  /** The URL the agent uses; its port (and host, when an IP) decide the Redis rule. */
  redisUrl: string;
  redisPeers?: V1NetworkPolicyPeer[];
  dnsPeers?: V1NetworkPolicyPeer[];
  /** 'none' allows only Redis; DNS is still allowed when the Redis host is a name. */
  network: 'deny-egress' | 'none';
  owner?: OwnerPod;
}

const defaultDnsPeers: V1NetworkPolicyPeer[] = [
  {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
    podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
  },
];

function redisHostAndPort(redisUrl: string): { host: string; port: number } {
  const url = new URL(redisUrl);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return { host, port: url.port ? Number(url.port) : 6379 };
}

function defaultRedisPeers(host: string): V1NetworkPolicyPeer[] {
  const family = isIP(host);
  if (family === 4) return [{ ipBlock: { cidr: `${host}/32` } }];
  if (family === 6) return [{ ipBlock: { cidr: `${host}/128` } }];
  // A policy cannot name a DNS host: allow the conventionally labelled Redis pods instead.
  return [{ namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'redis' } } }];
}

/**
 * The NetworkPolicy behind `network: deny-egress`: the sandbox may reach Redis (the agent's only
 * job) and cluster DNS, nothing else, and nothing may connect to it. It selects the pod by its
 * unique sandbox label, so it is created before the pod and the pod never runs unrestricted.
 */
export function buildEgressPolicy(input: EgressPolicyInput): V1NetworkPolicy {
  const { host, port } = redisHostAndPort(input.redisUrl);
  const needsDns = input.network === 'deny-egress' || isIP(host) === 0;
  const ownerReferences = ownerReferencesFor(input.owner, input.namespace);
  const egress: NonNullable<V1NetworkPolicy['spec']>['egress'] = [
    { to: input.redisPeers ?? defaultRedisPeers(host), ports: [{ protocol: 'TCP', port }] },
  ];
  if (needsDns) {
    egress.push({
      to: input.dnsPeers ?? defaultDnsPeers,
      ports: [
        { protocol: 'UDP', port: 53 },
        { protocol: 'TCP', port: 53 },
      ],
    });
  }
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: egressPolicyName(input.podName),
      namespace: input.namespace,
      labels: { ...identityLabels(input.jobId, input.tenant), [SANDBOX_POD_LABEL]: input.podName },
      ...(ownerReferences ? { ownerReferences } : {}),
    },
    spec: {
      podSelector: { matchLabels: { [SANDBOX_POD_LABEL]: input.podName } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress,
    },
  };
}
