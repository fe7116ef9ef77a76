/** Objects as the stand-in keeps them: plain JSON with the metadata fields it relies on. */
export interface KubeMetadata {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: string;
  creationTimestamp: string;
  generateName?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: KubeMetadata;
  [key: string]: unknown;
}

/** The four resources the backend uses, by their URL plural. */
export type ResourceKind = 'pods' | 'secrets' | 'persistentvolumeclaims' | 'networkpolicies';

export const kindNames: Record<ResourceKind, { kind: string; apiVersion: string }> = {
  pods: { kind: 'Pod', apiVersion: 'v1' },
  secrets: { kind: 'Secret', apiVersion: 'v1' },
  persistentvolumeclaims: { kind: 'PersistentVolumeClaim', apiVersion: 'v1' },
  networkpolicies: { kind: 'NetworkPolicy', apiVersion: 'networking.k8s.io/v1' },
};

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreEvent {
  type: WatchEventType;
  kind: ResourceKind;
  resourceVersion: number;
  object: KubeObject;
}
