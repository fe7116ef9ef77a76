import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmod,
  link,
  lstat,
  mkdir,
  mkdtemp,
  readFile,
  readlink,
  rm,
  stat,
  symlink,
  utimes,
  writeFile,
} from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeSnapshot, encodeSnapshot } from './snapshot-codec.js';
import { captureTree } from './tree-capture.js';
import {
  copyTree,
  encodeCopiedTrees,
  listTree,
  replaceTreeContents,
  TreeNotCopyableError,
} from './tree-copy.js';

// Issue 30 §7: a fork on the node that captured restores from a plain copy of the source's tree
// instead of its snapshot stream. The copy must hold what the stream holds.

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'tree-copy-test-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A tree with what a workspace holds: nested directories, odd modes, symlinks, a hard link, times. */
async function sourceTree(): Promise<string> {
  const src = join(root, 'src');
  await mkdir(join(src, 'a/b/c'), { recursive: true });
  await mkdir(join(src, 'empty'));
  await writeFile(join(src, 'a/text.txt'), 'hello\n');
  await writeFile(join(src, 'a/b/random.bin'), randomBytes(300_000));
  await writeFile(join(src, 'a/b/c/run.sh'), '#!/bin/sh\necho hi\n');
  await chmod(join(src, 'a/b/c/run.sh'), 0o755);
  await writeFile(join(src, 'secret'), 'x');
  await chmod(join(src, 'secret'), 0o600);
  await writeFile(join(src, 'setuid'), 'y');
  await chmod(join(src, 'setuid'), 0o4750);
  await link(join(src, 'a/text.txt'), join(src, 'hardlink.txt'));
  await symlink('a/text.txt', join(src, 'rel-link'));
  await symlink('/nowhere/at/all', join(src, 'dangling'));
  await utimes(join(src, 'a/text.txt'), 1_600_000_000, 1_600_000_000.5);
  await chmod(join(src, 'a/b'), 0o750);
  await utimes(join(src, 'a/b'), 1_500_000_000, 1_500_000_000);
  // Read-only last: its children are in place already.
  await chmod(join(src, 'a/b/c'), 0o555);
  return src;
}

/** Every entry a stream decodes to, with its content's bytes (what a restore would write). */
async function decoded(stream: NodeJS.ReadableStream): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const { entry, content } of decodeSnapshot(stream as AsyncIterable<Buffer>)) {
    const parts: Buffer[] = [];
    for await (const chunk of content) parts.push(chunk);
    out.push({ ...entry, content: Buffer.concat(parts).toString('base64') });
  }
  return out;
}

describe('tree copy', () => {
  it('copies a tree so that it encodes to the same snapshot entries and bytes as the source', async () => {
    const src = await sourceTree();
    const copy = join(root, 'copy');
    await copyTree(src, join(copy, 'work'));
    const fromSource = await decoded(encodeSnapshot(captureTree(src, 'work')));
    const fromCopy = await decoded(encodeCopiedTrees(copy, ['work']));
    expect(fromCopy).toEqual(fromSource);
    expect(fromCopy.length).toBe(12);
    // What the comparison covers, looked at directly: modes (set-user bit kept), symlinks, times.
    expect((await stat(join(copy, 'work/setuid'))).mode & 0o7777).toBe(0o4750);
    expect((await stat(join(copy, 'work/a/b/c'))).mode & 0o7777).toBe(0o555);
    expect(await readlink(join(copy, 'work/dangling'))).toBe('/nowhere/at/all');
    expect(Math.floor((await lstat(join(copy, 'work/a/text.txt'))).mtimeMs)).toBe(1_600_000_000_500);
    // A hard link is a file of its own, as the stream restores it.
    const [linked, original] = await Promise.all([
      stat(join(copy, 'work/hardlink.txt')),
      stat(join(copy, 'work/a/text.txt')),
    ]);
    expect(linked.ino).not.toBe(original.ino);
    await chmod(join(src, 'a/b/c'), 0o755);
    await chmod(join(copy, 'work/a/b/c'), 0o755);
  });

  it("asks beforeEntry before each entry it reads (a fork's upload waits there for the forks' restores)", async () => {
    const src = await sourceTree();
    const copy = join(root, 'copy');
    await copyTree(src, join(copy, 'work'));
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    let asked = 0;
    const stream = encodeCopiedTrees(copy, ['work'], {
      beforeEntry: async () => {
        asked++;
        await gate;
      },
    });
    const reading = decoded(stream);
    await new Promise((resolve) => setTimeout(resolve, 50));
    // Held at the first entry: nothing of the tree read yet.
    expect(asked).toBe(1);
    open();
    const fromCopy = await reading;
    expect(asked).toBe(12);
    expect(fromCopy).toEqual(await decoded(encodeSnapshot(captureTree(src, 'work'))));
    await chmod(join(src, 'a/b/c'), 0o755);
    await chmod(join(copy, 'work/a/b/c'), 0o755);
  });

  it('refuses a tree holding a fifo (a snapshot skips it, so the copy would differ)', async () => {
    const src = join(root, 'src');
    await mkdir(join(src, 'd'), { recursive: true });
    execFileSync('mkfifo', [join(src, 'd/pipe')]);
    await expect(copyTree(src, join(root, 'copy'))).rejects.toThrow(TreeNotCopyableError);
    await expect(copyTree(src, join(root, 'copy2'))).rejects.toThrow(/d\/pipe is a socket, fifo or device/);
  });

  it("lists a copy's entries and bytes; its fingerprint changes with any change, not with a read", async () => {
    const src = await sourceTree();
    await chmod(join(src, 'a/b/c'), 0o755);
    const listed = await listTree(src);
    expect(listed.entries).toBe(12);
    expect(listed.bytes).toBe(6 + 300_000 + 18 + 1 + 1 + 6);
    await readFile(join(src, 'a/b/random.bin'));
    expect((await listTree(src)).fingerprint).toBe(listed.fingerprint);

    const changes: Array<() => Promise<unknown>> = [
      // Same size, same times put back: the change time still moves.
      async () => {
        const before = await stat(join(src, 'a/text.txt'));
        await writeFile(join(src, 'a/text.txt'), 'HELLO\n');
        await utimes(join(src, 'a/text.txt'), before.atime, before.mtime);
      },
      () => chmod(join(src, 'secret'), 0o644),
      () => rm(join(src, 'a/b/random.bin')),
      () => writeFile(join(src, 'a/b/c/new'), ''),
    ];
    let previous = listed.fingerprint;
    for (const change of changes) {
      await change();
      const now = (await listTree(src)).fingerprint;
      expect(now).not.toBe(previous);
      previous = now;
    }
  });

  it('replaces what a directory holds with a copy, leaving the directory itself as it was', async () => {
    const src = await sourceTree();
    const copy = join(root, 'copy');
    await copyTree(src, copy);
    const target = join(root, 'target');
    await mkdir(join(target, 'stale/deep'), { recursive: true });
    await writeFile(join(target, 'stale/deep/f'), 'old');
    await writeFile(join(target, 'secret'), 'old secret, longer than the new one');
    await chmod(target, 0o711);
    const { removed } = await replaceTreeContents(target, copy);
    expect(removed).toBe(2);
    expect((await stat(target)).mode & 0o7777).toBe(0o711);
    const restored = await decoded(encodeSnapshot(captureTree(target, 'work')));
    expect(restored).toEqual(await decoded(encodeSnapshot(captureTree(src, 'work'))));
    for (const dir of [src, copy, target]) await chmod(join(dir, 'a/b/c'), 0o755);
  });
});
