import type { V1OwnerReference } from '@kubernetes/client-node';
import type { OwnerPod } from './kubernetes-settings.js';

/**
 * An owner reference to the service's own pod, so the garbage collector deletes a sandbox whose
 * service is gone. Only within one namespace: Kubernetes has no cross-namespace owners, and a
 * namespaced object whose owner uid is not found in its own namespace is deleted by the garbage
 * collector at once — so a reference to a pod elsewhere would kill every sandbox on creation.
 */
export function ownerReferencesFor(
  owner: OwnerPod | undefined,
  namespace: string,
): V1OwnerReference[] | undefined {
  if (!owner) return undefined;
  if (owner.namespace !== undefined && owner.namespace !== namespace) return undefined;
  // blockOwnerDeletion stays unset: setting it needs update rights on the owner's finalizers,
  // and nothing should wait for sandboxes before the service pod may go.
  return [{ apiVersion: 'v1', kind: 'Pod', name: owner.name, uid: owner.uid, controller: false }];
}
