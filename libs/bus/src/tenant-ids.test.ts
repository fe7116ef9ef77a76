import { JobIdSchema } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import {
  isScopedJobId,
  maxUserIdLength,
  scopedJobId,
  tenantIdPrefix,
  userJobId,
  withUserIds,
} from './tenant-ids.js';

describe('tenant-scoped ids', () => {
  it('tenant default keeps plain ids; others get a deterministic prefix of their own', () => {
    expect(scopedJobId('default', 'smoke-test')).toBe('smoke-test');
    const acme = scopedJobId('acme', 'my-sandbox');
    expect(acme).toMatch(/^t\.[a-z2-7]{16}\.my-sandbox$/);
    expect(scopedJobId('acme', 'my-sandbox')).toBe(acme);
    expect(scopedJobId('globex', 'my-sandbox')).not.toBe(acme);
    expect(tenantIdPrefix('acme')).not.toBe(tenantIdPrefix('acme2'));
  });

  it('reads back the user id and stays a valid job id at the longest allowed user id', () => {
    const long = 'x'.repeat(maxUserIdLength('acme'));
    const internal = scopedJobId('acme', long);
    expect(JobIdSchema.safeParse(internal).success).toBe(true);
    expect(JobIdSchema.safeParse(`${internal}x`).success).toBe(false);
    expect(userJobId(internal)).toBe(long);
    expect(userJobId('plain:id')).toBe('plain:id');
    expect(isScopedJobId(internal)).toBe(true);
    expect(isScopedJobId('my-sandbox')).toBe(false);
  });

  it('rewrites internal ids inside messages', () => {
    const id = scopedJobId('acme', 'a.b');
    expect(withUserIds(`sandbox ${id} not found (${id})`)).toBe('sandbox a.b not found (a.b)');
    expect(withUserIds('sandbox my-sandbox not found')).toBe('sandbox my-sandbox not found');
  });
});
