import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Pod } from 'kubernetes-models/v1/Pod';
import { Secret } from 'kubernetes-models/v1/Secret';
import type { ResourceKind } from './kube-object.js';

/**
 * Checks a submitted object against the Kubernetes OpenAPI schema (kubernetes-models), as the
 * API server would before storing it. Returns the problem, or undefined when it is valid.
 */
export function schemaProblem(kind: ResourceKind, body: unknown): string | undefined {
  try {
    const data = body as never;
    if (kind === 'pods') new Pod(data).validate();
    else if (kind === 'secrets') new Secret(data).validate();
    else if (kind === 'persistentvolumeclaims') new PersistentVolumeClaim(data).validate();
    else new NetworkPolicy(data).validate();
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}
