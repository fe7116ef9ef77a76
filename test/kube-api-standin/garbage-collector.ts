import type { ResourceKind } from './kube-object.js';
import type { ObjectStore } from './object-store.js';

const kinds: ResourceKind[] = ['pods', 'secrets', 'persistentvolumeclaims', 'networkpolicies'];

/**
 * The part of Kubernetes' garbage collector the backend relies on: an object whose
 * ownerReferences all name uids that no longer exist in its namespace is deleted (background
 * propagation). That covers both "the owner was deleted" and "the owner never existed here" (a
 * reference to another namespace). Runs after every ADDED or DELETED change, coalesced per tick.
 */
export function startGarbageCollector(
  store: ObjectStore,
  deleteObject: (kind: ResourceKind, namespace: string, name: string) => Promise<unknown>,
): () => void {
  const pending = new Set<string>();
  let scheduled = false;

  const collect = (namespace: string) => {
    const all = kinds.flatMap((kind) => store.list(kind, namespace).map((object) => ({ kind, object })));
    const uids = new Set(all.map(({ object }) => object.metadata.uid));
    for (const { kind, object } of all) {
      const owners = (object.metadata.ownerReferences as Array<{ uid: string }> | undefined) ?? [];
      if (owners.length === 0 || owners.some((o) => uids.has(o.uid))) continue;
      if (object.metadata.deletionTimestamp) continue;
      void deleteObject(kind, namespace, object.metadata.name).catch(() => {});
    }
  };

  const unsubscribe = store.subscribe((event) => {
    if (event.type === 'MODIFIED') return;
    pending.add(event.object.metadata.namespace);
    if (scheduled) return;
    scheduled = true;
    setImmediate(() => {
      scheduled = false;
      const namespaces = [...pending];
      pending.clear();
      for (const namespace of namespaces) collect(namespace);
    });
  });
  return unsubscribe;
}
