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

  it("a tenant's volume: the operator's storage class, its size limit as the request, labelled by its name", () => {
    const claim = buildWorkspaceClaim({
      name: 'sandstream-vol-0123456789abcdef',
      namespace: 'sandboxes',
      tenant: 'acme',
      size: String(64 * 1024 * 1024),
      storageClassName: 'fast',
      volume: 'data',
    });
    expect(() => new PersistentVolumeClaim(claim as never).validate()).not.toThrow();
    expect(claim.spec).toMatchObject({
      storageClassName: 'fast',
      resources: { requests: { storage: '67108864' } },
    });
    expect(claim.metadata?.labels).toMatchObject({
      'sandstream.dev/volume': 'data',
      'sandstream.dev/tenant': 'acme',
    });
    expect(claim.metadata?.labels).not.toHaveProperty('sandstream.dev/workspace');
  });
});
