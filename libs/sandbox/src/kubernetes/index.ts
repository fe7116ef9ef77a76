import { CoreV1Api, KubeConfig, NetworkingV1Api } from '@kubernetes/client-node';
import type { Redis } from 'ioredis';
import { KubernetesBackend } from './kubernetes-backend.js';
import { type KubernetesSettingsInput, KubernetesSettingsSchema } from './kubernetes-settings.js';

export { EgressForwardProxy, type EgressForwardProxyOptions } from './egress-forward-proxy.js';
export {
  networkPolicyAccessLookup,
  type ProxyAccess,
  type ProxyAccessLookup,
  proxyAccessOf,
} from './egress-proxy-access.js';
export { egressPolicyName, redisUrlSecretName, sandboxPodName, toLabelValue } from './kube-names.js';
export { KubernetesBackend } from './kubernetes-backend.js';
export { kubernetesSettingsFromEnv } from './kubernetes-env.js';
export type {
  KubernetesSettings,
  KubernetesSettingsInput,
  OwnerPod,
  RedisUrlSource,
} from './kubernetes-settings.js';
export { KubernetesSettingsSchema } from './kubernetes-settings.js';
export { buildEgressPolicy } from './network-policy-builder.js';
export type { PodAssessment } from './pod-assessment.js';
export { assessPod } from './pod-assessment.js';
export { buildSandboxPod, INJECT_CONTAINER, TOOLCHAIN_CONTAINER } from './pod-builder.js';
export type { PodTemplate } from './pod-template.js';
export { PodTemplateSchema, parsePodTemplate } from './pod-template.js';
export { loadPodTemplateFile } from './pod-template-file.js';
export { mergePodTemplates } from './pod-template-merge.js';
export { buildRedisUrlSecret } from './redis-url-secret-builder.js';
export { buildWorkspaceClaim } from './workspace-claim-builder.js';

export interface KubernetesBackendOptions extends KubernetesSettingsInput {
  /** Default: KubeConfig.loadFromDefault() (in-cluster service account, or ~/.kube/config). */
  kubeConfig?: KubeConfig;
  coreApi?: CoreV1Api;
  networkingApi?: NetworkingV1Api;
  /** Lets destroy() push the shutdown step and remove the sandbox keys itself (see KubernetesBackendDeps). */
  redis?: Redis;
}

/** The Kubernetes backend, with settings validated up front: a bad option fails at start, naming the field. */
export function createKubernetesBackend(options: KubernetesBackendOptions): KubernetesBackend {
  const { kubeConfig: givenConfig, coreApi, networkingApi, redis, ...rest } = options;
  const parsed = KubernetesSettingsSchema.safeParse(rest);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || 'options'}: ${i.message}`);
    throw new Error(`invalid Kubernetes backend options: ${issues.join('; ')}`);
  }
  const kubeConfig =
    givenConfig ??
    (() => {
      const kc = new KubeConfig();
      kc.loadFromDefault();
      return kc;
    })();
  return new KubernetesBackend({
    kubeConfig,
    core: coreApi ?? kubeConfig.makeApiClient(CoreV1Api),
    networking: networkingApi ?? kubeConfig.makeApiClient(NetworkingV1Api),
    settings: parsed.data,
    ...(redis ? { redis } : {}),
  });
}
