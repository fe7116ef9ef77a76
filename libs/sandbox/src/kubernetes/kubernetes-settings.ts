import { z } from 'zod';
import { allowOpenRedisVar } from '../open-redis.js';
import { ResourcePolicySchema } from '../resource-policy.js';
import { PodTemplateSchema } from './pod-template.js';

const dnsLabel = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'must be a DNS-1123 label (lower-case letters, digits, "-")')
  .max(63, 'is at most 63 characters');

/** The service's own pod, learnt from the downward API (POD_NAME / POD_UID / POD_NAMESPACE). */
export const OwnerPodSchema = z.object({
  name: z.string().min(1, 'owner.name must not be empty'),
  uid: z.string().min(1, 'owner.uid must not be empty'),
  /** When set and different from the sandbox namespace, no owner reference is written (see docs). */
  namespace: z.string().optional(),
});
export type OwnerPod = z.infer<typeof OwnerPodSchema>;

/**
 * Where the toolchain container's REDIS_URL comes from:
 * - 'plain': the URL is written into the pod spec (fine for a password-less in-cluster Redis);
 * - 'per-sandbox': the backend creates a Secret per sandbox holding the URL (the URL carries a
 *   per-sandbox ACL password, which must not sit in a pod spec anyone with `get pods` can read);
 * - { secretName, key }: an operator-managed Secret shared by all sandboxes.
 * 'auto' picks 'per-sandbox' when the URL has a password and 'plain' otherwise.
 */
export const RedisUrlSourceSchema = z.union([
  z.enum(['auto', 'plain', 'per-sandbox']),
  z.object({ secretName: z.string().min(1), key: z.string().min(1) }),
]);
export type RedisUrlSource = z.infer<typeof RedisUrlSourceSchema>;

const pullPolicy = z.enum(['Always', 'IfNotPresent', 'Never']);

/** A NetworkPolicyPeer, kept loose: the API server validates its inner shape. */
const PeerSchema = z.record(z.string(), z.unknown());

export const KubernetesSettingsSchema = z.object({
  namespace: dnsLabel.default('default'),
  /** Image whose entrypoint copies the agent and its loader into /shared. */
  agentCarrierImage: z.string().min(1, 'agentCarrierImage must name an image'),
  agentCarrierPullPolicy: pullPolicy.default('IfNotPresent'),
  toolchainPullPolicy: pullPolicy.default('IfNotPresent'),
  owner: OwnerPodSchema.optional(),
  redisUrlSource: RedisUrlSourceSchema.default('auto'),
  /** Operator-wide pod template merged into every pod (a per-template podTemplate goes on top). */
  podTemplate: PodTemplateSchema.optional(),
  serviceAccountName: z.string().optional(),
  storageClassName: z.string().optional(),
  defaultWorkspaceSize: z
    .string()
    .regex(/^\d+(\.\d+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$/, 'defaultWorkspaceSize must be a quantity such as "1Gi"')
    .default('1Gi'),
  /**
   * Who may connect to a sandbox (its preview URLs, through the api): default the api's pods of
   * deploy/k8s (app.kubernetes.io/name=api, part-of=sandstream) in the sandboxes' namespace.
   */
  previewIngressPeers: z.array(PeerSchema).optional(),
  /**
   * Every sandbox's policy allows Redis through these peers. Default: an ipBlock when the Redis URL
   * host is an IP, else pods labelled app.kubernetes.io/name=redis in any namespace (a
   * NetworkPolicy cannot name a DNS host).
   */
  redisEgressPeers: z.array(PeerSchema).optional(),
  /** Where cluster DNS runs; default kube-dns / CoreDNS pods in kube-system. */
  dnsEgressPeers: z.array(PeerSchema).optional(),
  /**
   * The egress forward proxy that enforces domain allow-lists (egress-forward-proxy.ts). Without
   * it, a domain entry is refused, naming the field. `url` is what sandboxes are given as
   * HTTPS_PROXY / HTTP_PROXY (a Service's name, usually); `peers` are the pods serving it, the only
   * thing a domain-listing sandbox's policy lets it reach by name (default: pod-lifecycle's pods,
   * app.kubernetes.io/name=pod-lifecycle, part-of=sandstream, in the sandboxes' namespace);
   * `listenPort` makes this backend serve it (serve()), as deploy/k8s's pod-lifecycle does.
   */
  egressProxy: z
    .strictObject({
      url: z
        .string()
        .regex(
          /^http:\/\/[^/@]+(:\d+)?\/?$/,
          'egressProxy.url must be http://host[:port], without a path or userinfo',
        ),
      peers: z.array(PeerSchema).optional(),
      listenPort: z
        .number()
        .int()
        .min(1, 'egressProxy.listenPort must be 1-65535')
        .max(65535, 'egressProxy.listenPort must be 1-65535')
        .optional(),
    })
    .optional(),
  /** SIGTERM-to-SIGKILL time the kubelet gives the agent when the pod is deleted. */
  terminationGraceSeconds: z.number().int().min(0).max(3600).default(10),
  /** The toolchain writes wherever its tools expect (~/.cache, /tmp): read-write by default. */
  toolchainReadOnlyRootFilesystem: z.boolean().default(false),
  /** Operator defaults and maxima for CPU, memory and pids; default DEFAULT_RESOURCE_POLICY. */
  resourcePolicy: ResourcePolicySchema.optional(),
  /** Create pods even when their Redis lets anyone in as `default` (development only). */
  allowOpenRedis: z.boolean().default(false),
  /** How often the agent heartbeat is checked once the pod runs. */
  heartbeatPollMs: z.number().int().min(10).max(60_000).default(200),
  /** Lines of the crashed container's log quoted in an agent_crashed error. */
  crashLogTailLines: z.number().int().min(0).max(1000).default(20),
});
export type KubernetesSettings = z.output<typeof KubernetesSettingsSchema>;
export type KubernetesSettingsInput = z.input<typeof KubernetesSettingsSchema>;

/** The environment a service reads its Kubernetes settings from. Blank counts as unset. */
export const KubernetesEnvSchema = z.object({
  SANDSTREAM_K8S_NAMESPACE: z.string().optional(),
  SANDSTREAM_AGENT_CARRIER_IMAGE: z.string().optional(),
  SANDSTREAM_K8S_SERVICE_ACCOUNT: z.string().optional(),
  SANDSTREAM_K8S_STORAGE_CLASS: z.string().optional(),
  /** 'auto' | 'plain' | 'per-sandbox' | '<secret-name>/<key>' */
  SANDSTREAM_K8S_REDIS_URL_SOURCE: z.string().optional(),
  SANDSTREAM_K8S_POD_TEMPLATE_FILE: z.string().optional(),
  /** The egress forward proxy's URL (settings.egressProxy.url): enables domain allow-lists. */
  SANDSTREAM_K8S_EGRESS_PROXY_URL: z.string().optional(),
  /** This replica serves the egress proxy on this port (settings.egressProxy.listenPort). */
  SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT: z
    .string()
    .regex(/^\d{1,5}$/, 'SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT must be a port number')
    .optional(),
  SANDSTREAM_ALLOW_OPEN_REDIS: allowOpenRedisVar,
  POD_NAME: z.string().optional(),
  POD_UID: z.string().optional(),
  POD_NAMESPACE: z.string().optional(),
});
