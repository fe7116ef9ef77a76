import {
  KubernetesEnvSchema,
  type KubernetesSettingsInput,
  type RedisUrlSource,
} from './kubernetes-settings.js';
import { loadPodTemplateFile } from './pod-template-file.js';

function parseRedisUrlSource(value: string): RedisUrlSource {
  if (value === 'auto' || value === 'plain' || value === 'per-sandbox') return value;
  const [secretName, key, ...rest] = value.split('/');
  if (!secretName || !key || rest.length > 0) {
    throw new Error(
      `SANDSTREAM_K8S_REDIS_URL_SOURCE must be auto, plain, per-sandbox or <secret-name>/<key> (got ${JSON.stringify(value)})`,
    );
  }
  return { secretName, key };
}

/**
 * Kubernetes backend settings from a service's environment. POD_NAME / POD_UID / POD_NAMESPACE
 * come from the downward API (deploy/k8s/base/*-deployment.yaml) and give sandboxes an owner.
 */
export function kubernetesSettingsFromEnv(
  rawEnv: Record<string, string | undefined> = process.env,
): KubernetesSettingsInput {
  const blank = (v: string | undefined) => (v === undefined || v.trim() === '' ? undefined : v.trim());
  const env = KubernetesEnvSchema.parse(
    Object.fromEntries(Object.entries(rawEnv).map(([k, v]) => [k, blank(v)])),
  );
  if (!env.SANDSTREAM_AGENT_CARRIER_IMAGE) {
    throw new Error(
      'SANDSTREAM_AGENT_CARRIER_IMAGE must name the agent carrier image for Kubernetes sandboxes',
    );
  }
  const settings: KubernetesSettingsInput = {
    agentCarrierImage: env.SANDSTREAM_AGENT_CARRIER_IMAGE,
  };
  const namespace = env.SANDSTREAM_K8S_NAMESPACE ?? env.POD_NAMESPACE;
  if (namespace) settings.namespace = namespace;
  if (env.POD_NAME && env.POD_UID) {
    settings.owner = {
      name: env.POD_NAME,
      uid: env.POD_UID,
      ...(env.POD_NAMESPACE ? { namespace: env.POD_NAMESPACE } : {}),
    };
  }
  if (env.SANDSTREAM_K8S_SERVICE_ACCOUNT) settings.serviceAccountName = env.SANDSTREAM_K8S_SERVICE_ACCOUNT;
  if (env.SANDSTREAM_K8S_STORAGE_CLASS) settings.storageClassName = env.SANDSTREAM_K8S_STORAGE_CLASS;
  if (env.SANDSTREAM_K8S_REDIS_URL_SOURCE) {
    settings.redisUrlSource = parseRedisUrlSource(env.SANDSTREAM_K8S_REDIS_URL_SOURCE);
  }
  if (env.SANDSTREAM_ALLOW_OPEN_REDIS) settings.allowOpenRedis = true;
  if (env.SANDSTREAM_K8S_EGRESS_PROXY_URL) {
    settings.egressProxy = {
      url: env.SANDSTREAM_K8S_EGRESS_PROXY_URL,
      ...(env.SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT
        ? { listenPort: Number(env.SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT) }
        : {}),
    };
  } else if (env.SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT) {
    throw new Error(
      'SANDSTREAM_K8S_EGRESS_PROXY_LISTEN_PORT needs SANDSTREAM_K8S_EGRESS_PROXY_URL: the URL sandboxes are given for the proxy',
    );
  }
  if (env.SANDSTREAM_K8S_POD_TEMPLATE_FILE) {
    settings.podTemplate = loadPodTemplateFile(env.SANDSTREAM_K8S_POD_TEMPLATE_FILE);
  }
  return settings;
}
