import type { V1PersistentVolumeClaim } from '@kubernetes/client-node';
import { SandboxLabels } from '../backend.js';
import { toLabelValue } from './kube-names.js';

export interface WorkspaceClaimInput {
  name: string;
  namespace: string;
  tenant: string;
  size: string;
  storageClassName?: string;
  /** A tenant's volume (spec.volumes): its name as the tenant knows it, as a label. */
  volume?: string;
}

/**
 * The claim behind `spec.persistentWorkspace`. It has no owner reference and no job label on
 * purpose: it outlives every sandbox that mounts it, and the reaper must not take it for an
 * orphan of a finished job.
 */
export function buildWorkspaceClaim(input: WorkspaceClaimInput): V1PersistentVolumeClaim {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: input.name,
      namespace: input.namespace,
      labels: {
        [SandboxLabels.managedBy]: SandboxLabels.managedByValue,
        [SandboxLabels.tenant]: toLabelValue(input.tenant),
        ...(input.volume
          ? { 'sandstream.dev/volume': input.volume }
          : { 'sandstream.dev/workspace': 'true' }),
      },
    },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: input.size } },
      ...(input.storageClassName ? { storageClassName: input.storageClassName } : {}),
    },
  };
}
