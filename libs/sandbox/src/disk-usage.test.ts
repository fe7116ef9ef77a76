import { execFileSync } from 'node:child_process';
import { chmod, link, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allocatedBytes, WALK_ENTRIES_MAX, walkBytes } from './disk-usage.js';

// A small tree is measured in this process (a child process costs its parent more than a few
// hundred lstat calls); a larger one goes to `du`. A `du` earlier on PATH records each call and
// hands over to the real one, so the test sees which way each tree took.

const du = (dir: string) =>
  Number(execFileSync('du', ['-s', '-B1', '-x', dir], { encoding: 'utf8' }).split(/\s/)[0]);

describe('allocatedBytes', () => {
  let dir: string;
  let calls: string;
  let savedPath: string | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'disk-usage-'));
    calls = join(dir, 'du-calls.log');
    await mkdir(join(dir, 'bin'));
    const realDu = execFileSync('sh', ['-c', 'command -v du'], { encoding: 'utf8' }).trim();
    await writeFile(join(dir, 'bin', 'du'), `#!/bin/sh\necho "$*" >> ${calls}\nexec ${realDu} "$@"\n`);
    await chmod(join(dir, 'bin', 'du'), 0o755);
    savedPath = process.env.PATH;
    process.env.PATH = `${join(dir, 'bin')}:${savedPath}`;
  });
  afterAll(async () => {
    process.env.PATH = savedPath;
    await rm(dir, { recursive: true, force: true });
  });

  const duCalls = async () =>
    (await readFile(calls, 'utf8').catch(() => '')).split('\n').filter(Boolean).length;

  it('measures a small tree without a child process, as du would (hard links once, the root counted)', async () => {
    const tree = join(dir, 'small');
    await mkdir(join(tree, 'a', 'b'), { recursive: true });
    await writeFile(join(tree, 'a', 'one.bin'), Buffer.alloc(100_000, 1));
    await writeFile(join(tree, 'a', 'b', 'two.txt'), 'hello');
    await link(join(tree, 'a', 'one.bin'), join(tree, 'a', 'b', 'one-again.bin'));
    const before = await duCalls();
    const bytes = await allocatedBytes(tree);
    expect(await duCalls()).toBe(before);
    expect(bytes).toBe(du(tree));
  });

  it('hands a tree of more entries than the walk takes to du', async () => {
    const tree = join(dir, 'large');
    await mkdir(tree);
    for (let i = 0; i <= WALK_ENTRIES_MAX; i++) await writeFile(join(tree, `f${i}`), 'x');
    expect(await walkBytes(tree, WALK_ENTRIES_MAX)).toBeUndefined();
    const before = await duCalls();
    const bytes = await allocatedBytes(tree);
    expect(await duCalls()).toBe(before + 1);
    expect(bytes).toBe(await walkBytes(tree));
  });

  it('is 0 for a directory that is not there', async () => {
    expect(await allocatedBytes(join(dir, 'absent'))).toBe(0);
  });
});
