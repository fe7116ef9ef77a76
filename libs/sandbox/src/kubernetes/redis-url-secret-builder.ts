import type { V1Secret } from '@kubernetes/client-node';
import { redisUrlSecretName } from './kube-names.js';
import type { OwnerPod } from './kubernetes-settings.js';
import { ownerReferencesFor } from './owner-reference.js';
import { identityLabels } from './sandbox-metadata.js';

export const REDIS_URL_SECRET_KEY = 'url';

export interface RedisUrlSecretInput {
  podName: string;
  namespace: string;
  jobId: string;
  tenant: string;
  redisUrl: string;
  owner?: OwnerPod;
}

/**
 * A per-sandbox Secret holding the agent's Redis URL, whose password belongs to this sandbox's
 * own ACL user. Reading pods does not reveal it; only the kubelet resolves it into REDIS_URL.
 */
export function buildRedisUrlSecret(input: RedisUrlSecretInput): V1Secret {
  const ownerReferences = ownerReferencesFor(input.owner, input.namespace);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: {
      name: redisUrlSecretName(input.podName),
      namespace: input.namespace,
      labels: identityLabels(input.jobId, input.tenant),
      ...(ownerReferences ? { ownerReferences } : {}),
    },
    stringData: { [REDIS_URL_SECRET_KEY]: input.redisUrl },
  };
}

/** True when the URL carries a password (redis://user:pass@host or redis://:pass@host). */
export function redisUrlHasPassword(redisUrl: string): boolean {
  try {
    return new URL(redisUrl).password !== '';
  } catch {
    return false;
  }
}
