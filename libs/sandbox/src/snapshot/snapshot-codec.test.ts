import { mkdir, mkdtemp, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { decodeSnapshot, encodeSnapshot } from './snapshot-codec.js';
import { captureTree } from './tree-capture.js';
import { TreeRestore } from './tree-restore.js';

const dirs: string[] = [];
async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'snap-codec-'));
  dirs.push(dir);
  return dir;
}
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function bytesOf(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function restoreInto(dir: string, snapshot: Buffer): Promise<void> {
  const tree = new TreeRestore(dir, 'work');
  for await (const entry of decodeSnapshot(Readable.from([snapshot]))) await tree.apply(entry);
  await tree.finish();
}

describe('snapshot stream of a directory tree', () => {
  it('restores in place exactly: added gone, removed back, modes, symlinks, empty dirs', async () => {
    const dir = await tempDir();
    await mkdir(join(dir, 'src/empty'), { recursive: true });
    await writeFile(join(dir, 'src/main.sh'), '#!/bin/sh\necho hi\n', { mode: 0o750 });
    await writeFile(join(dir, 'big.bin'), Buffer.alloc(3 << 20, 7));
    await symlink('src/main.sh', join(dir, 'link'));
    const snapshot = await bytesOf(encodeSnapshot(captureTree(dir, 'work')));

    await rm(join(dir, 'src'), { recursive: true });
    await writeFile(join(dir, 'added.txt'), 'new');
    await writeFile(join(dir, 'big.bin'), 'changed');
    await rm(join(dir, 'link'));
    await writeFile(join(dir, 'link'), 'not a link');

    await restoreInto(dir, snapshot);
    expect(await readFile(join(dir, 'src/main.sh'), 'utf8')).toBe('#!/bin/sh\necho hi\n');
    expect((await stat(join(dir, 'src/main.sh'))).mode & 0o777).toBe(0o750);
    expect((await stat(join(dir, 'src/empty'))).isDirectory()).toBe(true);
    expect((await readFile(join(dir, 'big.bin'))).equals(Buffer.alloc(3 << 20, 7))).toBe(true);
    expect(await readlink(join(dir, 'link'))).toBe('src/main.sh');
    await expect(stat(join(dir, 'added.txt'))).rejects.toThrow(/ENOENT/);
  });

  it('refuses a truncated or altered snapshot, naming what is wrong', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'a.txt'), 'x'.repeat(100_000));
    await writeFile(join(dir, 'b.txt'), 'hello');
    const snapshot = await bytesOf(encodeSnapshot(captureTree(dir, 'work')));
    const target = await tempDir();

    await expect(restoreInto(target, snapshot.subarray(0, Math.floor(snapshot.length / 2)))).rejects.toThrow(
      /truncated|damaged/,
    );
    const flipped = Buffer.from(snapshot);
    flipped[Math.floor(flipped.length / 2)] ^= 0xff;
    await expect(restoreInto(target, flipped)).rejects.toThrow(/damaged|checksum mismatch/);
    await expect(restoreInto(target, Buffer.from('not a snapshot at all'))).rejects.toThrow(/damaged|magic/);
  });
});
