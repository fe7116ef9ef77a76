import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { describe, expect, it } from 'vitest';
import { buildWorkspaceClaim } from './workspace-claim-builder.js';

describe('buildWorkspaceClaim', () => {
  it('is a valid PVC without job label or owner, so nothing deletes it with a sandbox', () => {
    const claim = buildWorkspaceClaim({
      name: 'ws-acme',
      namespace: 'sandboxes',
      tenant: 'acme',
      size: '5Gi',
      storageClassName: 'fast',
    });
    expect(() => new PersistentVolumeClaim(claim as never).validate()).not.toThrow();
    expect(claim.spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '5Gi' } },
      storageClassName: 'fast',
    });
    expect(claim.metadata?.labels).not.toHaveProperty('sandstream.dev/job-id');
    expect(claim.metadata?.ownerReferences).toBeUndefined();
  });
});
