import { describe, expect, it } from 'vitest';
import { PREVIEW_LABEL_MAX, parsePreviewHost, previewDomainForE2b, previewLabel } from './preview-label.js';
import { previewTokenRefusal, signPreviewToken } from './preview-token.js';
import { scopedJobId } from './tenant-ids.js';

describe('previewLabel', () => {
  it('is DNS-safe, lowercase and at most 50 characters for any id, and differs across tenants', () => {
    const ids = ['My_App.1:x', 'A'.repeat(128), '___', 'sandbox-1', `${'x.'.repeat(64)}`];
    for (const id of ids) {
      const label = previewLabel('acme', id);
      expect(label).toMatch(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/);
      expect(label.length).toBeLessThanOrEqual(PREVIEW_LABEL_MAX);
      expect(previewLabel('other', id)).not.toBe(label);
    }
    expect(previewLabel('acme', 'My_App.1')).toMatch(/^my-app-1-[0-9a-f]{12}$/);
    // Ids that fold to the same readable part stay apart.
    expect(previewLabel('acme', 'a.b')).not.toBe(previewLabel('acme', 'a_b'));
  });

  it('reads as the id its user gave, not the tenant-scoped internal id', () => {
    const internal = scopedJobId('acme', 'My_App.1');
    expect(previewLabel('acme', internal)).toMatch(/^my-app-1-[0-9a-f]{12}$/);
    expect(previewLabel('acme', internal)).not.toBe(previewLabel('acme', 'My_App.1'));
  });

  it('parses back from a Host header under the domain only', () => {
    const label = previewLabel('acme', 'My_App.1');
    expect(parsePreviewHost(`3000-${label}.localhost:8080`, 'localhost')).toEqual({ port: 3000, label });
    expect(parsePreviewHost(`3000-${label}.example.com`, 'localhost')).toBeUndefined();
    expect(parsePreviewHost('127.0.0.1:8080', 'localhost')).toBeUndefined();
    expect(parsePreviewHost(`70000-${label}.localhost`, 'localhost')).toBeUndefined();
  });

  it("reads E2B's host form, `{port}-{id}.{domain}` with the domain previewDomainForE2b names", () => {
    const id = scopedJobId('acme', '0b6f5a1e-4f7d-4c55-9d1e-1f0c2b3a4d5e');
    const domain = previewDomainForE2b('acme', id, 'localhost');
    expect(domain).toMatch(/^[0-9a-f]{12}\.localhost$/);
    const host = `3000-0b6f5a1e-4f7d-4c55-9d1e-1f0c2b3a4d5e.${domain}:8080`;
    expect(parsePreviewHost(host, 'localhost')).toEqual({ port: 3000, label: previewLabel('acme', id) });
    // An id its label does not spell as it is names no domain: no host could carry it.
    expect(previewDomainForE2b('acme', scopedJobId('acme', 'My_App.1'), 'localhost')).toBeUndefined();
  });
});

describe('preview tokens', () => {
  const secret = Buffer.alloc(32, 7);
  const want = { sandboxId: 's1', port: 3000, nowSeconds: 1000 };
  it('open only the sandbox and port they were signed for, until they expire', () => {
    const token = signPreviewToken(secret, { s: 's1', p: 3000, e: 2000 });
    expect(previewTokenRefusal(secret, token, want)).toBeUndefined();
    expect(previewTokenRefusal(secret, token, { ...want, port: 3001 })).toContain('another sandbox or port');
    expect(previewTokenRefusal(secret, token, { ...want, sandboxId: 's2' })).toContain('another sandbox');
    expect(previewTokenRefusal(secret, token, { ...want, nowSeconds: 2000 })).toContain('expired');
    expect(previewTokenRefusal(Buffer.alloc(32, 8), token, want)).toContain('not valid');
    const [body] = token.split('.');
    const forged = `${Buffer.from(JSON.stringify({ s: 's1', p: 3000, e: 9999 })).toString('base64url')}.${token.split('.')[1]}`;
    expect(body).not.toBe(forged.split('.')[0]);
    expect(previewTokenRefusal(secret, forged, want)).toContain('not valid');
  });
});
