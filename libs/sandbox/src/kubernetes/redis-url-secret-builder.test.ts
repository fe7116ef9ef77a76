import { Secret } from 'kubernetes-models/v1/Secret';
import { describe, expect, it } from 'vitest';
import { buildRedisUrlSecret, redisUrlHasPassword } from './redis-url-secret-builder.js';

describe('per-sandbox Redis URL secret', () => {
  it('is a valid Secret named after the pod, holding the URL under "url"', () => {
    const secret = buildRedisUrlSecret({
      podName: 'sbx-job-1-abc',
      namespace: 'sandboxes',
      jobId: 'job-1',
      tenant: 'acme',
      redisUrl: 'redis://sbx-job-1:pw@redis:6379',
    });
    expect(() => new Secret(secret as never).validate()).not.toThrow();
    expect(secret.metadata?.name).toBe('sbx-job-1-abc-redis');
    expect(secret.stringData).toEqual({ url: 'redis://sbx-job-1:pw@redis:6379' });
    expect(secret.metadata?.labels).toMatchObject({ 'sandstream.dev/job-id': 'job-1' });
  });

  it('tells URLs with a password from those without', () => {
    expect(redisUrlHasPassword('redis://user:pw@redis:6379')).toBe(true);
    expect(redisUrlHasPassword('redis://:pw@redis:6379')).toBe(true);
    expect(redisUrlHasPassword('redis://redis:6379')).toBe(false);
    expect(redisUrlHasPassword('not a url')).toBe(false);
  });
});
