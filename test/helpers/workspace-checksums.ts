import { createHash } from 'node:crypto';
import type { Sandbox } from '@sandstream/client';
import { expect } from 'vitest';

export const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

/** Every regular file under the workspace's `data/` with its sha256, as `sha256sum` prints them (sorted). */
export async function checksums(sandbox: Sandbox): Promise<string> {
  const listed = await sandbox.exec('cd data && find . -type f | LC_ALL=C sort | xargs sha256sum');
  expect(listed.exitCode, listed.stderr).toBe(0);
  return listed.stdout;
}

/** What `checksums` should print for these `./path` → sha256 pairs. */
export function expectedChecksums(expected: ReadonlyMap<string, string>): string {
  return [...expected]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([path, sum]) => `${sum}  ${path}\n`)
    .join('');
}
