import { isIP } from 'node:net';
import type {
  V1NetworkPolicy,
  V1NetworkPolicyEgressRule,
  V1NetworkPolicyPeer,
  V1OwnerReference,
} from '@kubernetes/client-node';
import { allowEntries, type Egress } from '@sandstream/wire';
import { canonicalCidr, NON_PUBLIC_IPV4, NON_PUBLIC_IPV6 } from '../ip-ranges.js';
import { EGRESS_ANNOTATION, PROXY_TOKEN_ANNOTATION } from './egress-proxy-access.js';
import { egressPolicyName } from './kube-names.js';
import { identityAnnotations, identityLabels, SANDBOX_POD_LABEL } from './sandbox-metadata.js';

export interface EgressPolicyInput {
  podName: string;
  namespace: string;
  jobId: string;
  tenant: string;
  /** The URL the agent uses; its port (and host, when an IP) decide the Redis rule. */
  redisUrl: string;
  redisPeers?: V1NetworkPolicyPeer[];
  dnsPeers?: V1NetworkPolicyPeer[];
  /** Who may open connections to the sandbox: the api's pods, for preview URLs. None when absent. */
  ingressPeers?: V1NetworkPolicyPeer[];
  /** The sandbox's policy (libs/wire network-policy.ts); domain entries need `proxy` (see below). */
  egress: Egress;
  /** The egress forward proxy, for domain entries, and the hash of this sandbox's token for it. */
  proxy?: PolicyProxy;
  /** The sandbox's pod once it exists (deleted with it), before that the service's own pod. */
  ownerReferences?: V1OwnerReference[];
}

/** Where the egress forward proxy runs, as a policy names it, and this sandbox's access to it. */
export interface PolicyProxy {
  peers: V1NetworkPolicyPeer[];
  port: number;
  /** Whether the sandbox looks the proxy's host up (a Service name) or has its address. */
  needsDns: boolean;
  tokenSha256: string;
}

const defaultDnsPeers: V1NetworkPolicyPeer[] = [
  {
    namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } },
    podSelector: { matchLabels: { 'k8s-app': 'kube-dns' } },
  },
];

/**
 * Where the sandbox's Redis is (`host:port`, never its credentials), kept on the policy: a live
 * update rebuilds the Redis rule from it, since the URL itself may sit in a Secret this service
 * may not read (deploy/k8s/base/1-rbac.yaml).
 */
export const REDIS_ENDPOINT_ANNOTATION = 'sandstream.dev/redis-endpoint';

function redisHostAndPort(redisUrl: string): { host: string; port: number } {
  const url = new URL(redisUrl);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return { host, port: url.port ? Number(url.port) : 6379 };
}

/** The Redis URL a policy was built for, as far as a policy needs it (scheme, host, port). */
export function redisUrlOfPolicy(policy: V1NetworkPolicy): string | undefined {
  const endpoint = policy.metadata?.annotations?.[REDIS_ENDPOINT_ANNOTATION];
  return endpoint ? `redis://${endpoint}` : undefined;
}

function defaultRedisPeers(host: string): V1NetworkPolicyPeer[] {
  const family = isIP(host);
  if (family === 4) return [{ ipBlock: { cidr: `${host}/32` } }];
  if (family === 6) return [{ ipBlock: { cidr: `${host}/128` } }];
  // A policy cannot name a DNS host: allow the conventionally labelled Redis pods instead.
  return [{ namespaceSelector: {}, podSelector: { matchLabels: { 'app.kubernetes.io/name': 'redis' } } }];
}

/**
 * Why this policy cannot be enforced on Kubernetes, naming the field (`prefix` is where the policy
 * sits: `spec.network` at create, `network` on an update); undefined when it can. Domain entries
 * need the egress forward proxy: Docker sends a sandbox's 80 and 443 to its proxy with a nat
 * REDIRECT on the host, and a NetworkPolicy can only allow or drop, never redirect, so the pod is
 * given HTTPS_PROXY and its policy lets it reach the proxy (docs/kubernetes.md, "Egress").
 * `proxy` says whether this sandbox can use one: `missing` when the backend has none configured,
 * `not-in-pod` when the sandbox's pod was started without the proxy in its environment (a pod's
 * environment cannot change while it runs).
 */
export function kubernetesEgressRefusal(
  egress: Egress,
  prefix: string,
  proxy: 'ready' | 'missing' | 'not-in-pod',
): string | undefined {
  if (typeof egress === 'string' || proxy === 'ready') return undefined;
  const index = allowEntries(egress).findIndex((e) => e.kind === 'domain');
  if (index < 0) return undefined;
  const why =
    proxy === 'missing'
      ? 'domain entries need the egress proxy (the backend option egressProxy), and none is configured'
      : 'domain entries go through the egress proxy, and this sandbox was started without it in its environment (create it with a domain entry in its allow-list to give it one)';
  return `${prefix}.egress.allow[${index}] "${egress.allow[index]}": ${why}; list CIDRs or address:port entries instead`;
}

/** The rules after Redis and DNS: what the policy itself lets the sandbox reach. */
function policyRules(egress: Egress, proxy: PolicyProxy | undefined): V1NetworkPolicyEgressRule[] {
  if (egress === 'none') return [];
  // A pod given the proxy sends its HTTP clients there whatever its policy now says (its
  // environment cannot change): the proxy, which follows the same policy (egress-forward-proxy.ts),
  // stays reachable, and domains are reached through it alone.
  const viaProxy: V1NetworkPolicyEgressRule[] = proxy
    ? [{ to: proxy.peers, ports: [{ protocol: 'TCP', port: proxy.port }] }]
    : [];
  if (egress === 'internet') {
    // Every public address on every port; never the nodes, other pods, services or metadata,
    // which all sit in the excepted ranges.
    return [
      ...viaProxy,
      {
        to: [
          { ipBlock: { cidr: '0.0.0.0/0', except: [...NON_PUBLIC_IPV4] } },
          { ipBlock: { cidr: '::/0', except: [...NON_PUBLIC_IPV6] } },
        ],
      },
    ];
  }
  // One rule for the ranges of any port, then one per port (TCP and UDP, as on Docker), in the
  // order the list first names them.
  const byPort = new Map<number | undefined, V1NetworkPolicyPeer[]>();
  for (const entry of allowEntries(egress)) {
    if (entry.kind !== 'cidr') continue;
    const cidr = canonicalCidr(entry.address, entry.prefix);
    const peers = byPort.get(entry.port) ?? [];
    if (!peers.some((p) => p.ipBlock?.cidr === cidr)) peers.push({ ipBlock: { cidr } });
    byPort.set(entry.port, peers);
  }
  const rules: V1NetworkPolicyEgressRule[] = [...viaProxy];
  const anyPort = byPort.get(undefined);
  if (anyPort) rules.push({ to: anyPort });
  for (const [port, to] of byPort) {
    if (port === undefined) continue;
    rules.push({
      to,
      ports: [
        { protocol: 'TCP', port },
        { protocol: 'UDP', port },
      ],
    });
  }
  return rules;
}

/**
 * The sandbox's NetworkPolicy (docs/kubernetes.md, "Egress"): it may always reach Redis (the
 * agent's only job), cluster DNS when it has a use for it (`internet`, or a Redis named by a
 * host name), then what its policy says; only `ingressPeers` may connect to it. It selects the
 * pod by its unique sandbox label, so it is created before the pod and the pod never runs
 * unrestricted; a live update replaces it whole.
 */
export function buildEgressPolicy(input: EgressPolicyInput): V1NetworkPolicy {
  const refused = kubernetesEgressRefusal(input.egress, 'network', input.proxy ? 'ready' : 'missing');
  if (refused) throw new Error(refused);
  const { host, port } = redisHostAndPort(input.redisUrl);
  const needsDns =
    input.egress === 'internet' ||
    isIP(host) === 0 ||
    (input.egress !== 'none' && input.proxy?.needsDns === true);
  const egress: V1NetworkPolicyEgressRule[] = [
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
  egress.push(...policyRules(input.egress, input.proxy));
  const owners = input.ownerReferences?.length ? { ownerReferences: input.ownerReferences } : {};
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: {
      name: egressPolicyName(input.podName),
      namespace: input.namespace,
      labels: { ...identityLabels(input.jobId, input.tenant), [SANDBOX_POD_LABEL]: input.podName },
      annotations: {
        ...identityAnnotations(input.jobId, input.tenant),
        [REDIS_ENDPOINT_ANNOTATION]: `${isIP(host) === 6 ? `[${host}]` : host}:${port}`,
        // What the egress proxy reads back (egress-proxy-access.ts); kept across live updates.
        ...(input.proxy
          ? {
              [PROXY_TOKEN_ANNOTATION]: input.proxy.tokenSha256,
              [EGRESS_ANNOTATION]: JSON.stringify(input.egress),
            }
          : {}),
      },
      ...owners,
    },
    spec: {
      podSelector: { matchLabels: { [SANDBOX_POD_LABEL]: input.podName } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: input.ingressPeers?.length ? [{ _from: input.ingressPeers }] : [],
      egress,
    },
  };
}

/** The owner reference that ties the policy to the sandbox's pod: deleted by the garbage collector with it. */
export function sandboxPodOwner(pod: { name: string; uid: string }): V1OwnerReference[] {
  return [{ apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid, controller: false }];
}
