import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { confinementFailure, resolveStepPath } from './resolve-path.js';

let base: string;
beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'sandstream-confine-'));
  await mkdir(path.join(base, 'sub'));
  await symlink('/etc', path.join(base, 'out'));
  await symlink(path.join(base, 'sub'), path.join(base, 'in'));
});
afterAll(async () => {
  await rm(base, { recursive: true, force: true });
});

describe('resolveStepPath', () => {
  it('takes paths as they are when not confined (a container is the boundary)', () => {
    const ctx = { baseDirectory: base };
    expect(resolveStepPath(ctx, null, '/etc/passwd')).toBe('/etc/passwd');
    expect(resolveStepPath(ctx, 'sub', '../../x')).toBe(path.resolve(base, '..', 'x'));
  });

  it('confined, resolves absolute paths inside the base and stops `..` at it', () => {
    const ctx = { baseDirectory: base, confineFiles: true };
    expect(resolveStepPath(ctx, null, '/etc/passwd')).toBe(path.join(base, 'etc/passwd'));
    expect(resolveStepPath(ctx, null, '../../../x')).toBe(path.join(base, 'x'));
    expect(resolveStepPath(ctx, 'sub', 'a.txt')).toBe(path.join(base, 'sub/a.txt'));
    expect(resolveStepPath(ctx, '/sub/../..', 'a.txt')).toBe(path.join(base, 'a.txt'));
    expect(resolveStepPath(ctx, null, '.')).toBe(base);
  });
});

describe('confinementFailure', () => {
  const ctx = () => ({ baseDirectory: base, confineFiles: true });

  it('lets through paths inside, existing or not, and links that stay inside', async () => {
    expect(await confinementFailure(ctx(), path.join(base, 'sub'))).toBeNull();
    expect(await confinementFailure(ctx(), path.join(base, 'new/deeper/file.txt'))).toBeNull();
    expect(await confinementFailure(ctx(), path.join(base, 'in/file.txt'))).toBeNull();
  });

  it('refuses a path that a link leads out of the base, naming where', async () => {
    const refused = await confinementFailure(ctx(), path.join(base, 'out/hostname'));
    expect(refused?.errorCode).toBe('invalid_step');
    expect(refused?.errorMessage).toMatch(/leads out of the sandbox's directory .* to \/etc/);
    expect(await confinementFailure(ctx(), path.join(base, 'out/not-there/x'))).not.toBeNull();
  });

  it('follows a link only to a directory it is allowed (an in-process volume), not to its neighbours', async () => {
    const allowed = { ...ctx(), confineAllow: ['/etc/ssl'] };
    const volume = await mkdtemp(path.join(tmpdir(), 'sandstream-volume-'));
    try {
      await symlink(volume, path.join(base, 'vol'));
      const withVolume = { ...ctx(), confineAllow: [volume] };
      expect(await confinementFailure(withVolume, path.join(base, 'vol/new.txt'))).toBeNull();
      expect(await confinementFailure(ctx(), path.join(base, 'vol/new.txt'))).not.toBeNull();
      // Allowing /etc/ssl does not let `out` (a link to /etc) reach /etc/hostname.
      expect(await confinementFailure(allowed, path.join(base, 'out/hostname'))).not.toBeNull();
    } finally {
      await rm(volume, { recursive: true, force: true });
    }
  });

  it('checks nothing when not confined', async () => {
    expect(await confinementFailure({ baseDirectory: base }, path.join(base, 'out/hostname'))).toBeNull();
  });
});
