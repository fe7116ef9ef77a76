import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmod,
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
import { Readable } from 'node:stream';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { blockLevel } from './block-level.js';
import { checkedWhole } from './checked-whole.js';
import { INFLATE_IN_FLIGHT, type InflateStats, newInflateStats } from './gzip-members.js';
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

async function restoreInto(
  dir: string,
  snapshot: Buffer,
  stats?: InflateStats,
  options: { checked?: boolean } = {},
): Promise<void> {
  const tree = new TreeRestore(dir, 'work');
  // In 64 KB pieces, as a store hands them out: members span pieces.
  const pieces = Array.from({ length: Math.ceil(snapshot.length / 65536) }, (_, i) =>
    snapshot.subarray(i * 65536, (i + 1) * 65536),
  );
  const bytes = Readable.from(pieces);
  // As a restore gets them from the object store or the capture cache (checked-whole.ts).
  if (options.checked) checkedWhole(bytes);
  try {
    for await (const entry of decodeSnapshot(bytes, stats)) await tree.apply(entry);
    await tree.finish();
  } finally {
    tree.close();
  }
}

/** `snapshot`'s frames with its end marker rewritten by `change`, compressed again as one stream. */
function withEndMarker(snapshot: Buffer, change: (marker: Record<string, unknown>) => void): Buffer {
  const frames = gunzipSync(snapshot);
  // The end marker is the last frame: its 4-byte length, then its JSON.
  const at = frames.lastIndexOf('{"type":"end"');
  expect(frames.readUInt32BE(at - 4)).toBe(frames.length - at);
  const marker = JSON.parse(frames.subarray(at).toString('utf8')) as Record<string, unknown>;
  expect(marker.type).toBe('end');
  change(marker);
  const json = Buffer.from(JSON.stringify(marker));
  const length = Buffer.alloc(4);
  length.writeUInt32BE(json.length);
  return gzipSync(Buffer.concat([frames.subarray(0, at - 4), length, json]), { level: 1 });
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
    const middle = Math.floor(flipped.length / 2);
    flipped[middle] = (flipped[middle] as number) ^ 0xff;
    await expect(restoreInto(target, flipped)).rejects.toThrow(/damaged|checksum mismatch/);
    await expect(restoreInto(target, Buffer.from('not a snapshot at all'))).rejects.toThrow(/damaged|magic/);
  });

  it('skips the content checksum for bytes checked whole against their record, and refuses all else still', async () => {
    const dir = await tempDir();
    await writeFile(join(dir, 'a.txt'), 'x'.repeat(100_000));
    await writeFile(join(dir, 'b.bin'), randomBytes(3 << 20));
    const snapshot = await bytesOf(encodeSnapshot(captureTree(dir, 'work')));
    // An end marker whose checksum no content has: only the decoder's own SHA-256 sees it.
    const otherSum = withEndMarker(snapshot, (marker) => {
      marker.sha256 = '0'.repeat(64);
    });
    await expect(restoreInto(await tempDir(), otherSum)).rejects.toThrow(/checksum mismatch/);
    const target = await tempDir();
    await restoreInto(target, otherSum, undefined, { checked: true });
    execFileSync('diff', ['-r', dir, target]);

    // Checked whole or not, a stream cut short, an entry count that differs, a damaged member.
    const checked = { checked: true };
    const half = snapshot.subarray(0, Math.floor(snapshot.length / 2));
    await expect(restoreInto(await tempDir(), half, undefined, checked)).rejects.toThrow(/truncated|damaged/);
    const miscounted = withEndMarker(snapshot, (marker) => {
      marker.entries = (marker.entries as number) + 1;
    });
    await expect(restoreInto(await tempDir(), miscounted, undefined, checked)).rejects.toThrow(
      /end marker counts \d+ entries, the stream held \d+/,
    );
    const flipped = Buffer.from(snapshot);
    const middle = Math.floor(flipped.length / 2);
    flipped[middle] = (flipped[middle] as number) ^ 0xff;
    await expect(restoreInto(await tempDir(), flipped, undefined, checked)).rejects.toThrow(/damaged/);

    // A capture's spool followed as it grows is checked at its end (growing-spool.ts): the decoder
    // reads the source to its end before it returns, so that failure is the restore's.
    const spool = checkedWhole(
      (async function* () {
        yield snapshot;
        throw new Error("the capture's spool read back as 1 bytes hashing to x, written as 2 bytes");
      })(),
    );
    const entries = async () => {
      for await (const { content } of decodeSnapshot(spool)) for await (const _ of content);
    };
    await expect(entries()).rejects.toThrow(/damaged: the capture's spool read back as/);
  });

  it('restores a tree of many small files in nested directories with their modes and times', async () => {
    const dir = await tempDir();
    const modes = [0o644, 0o600, 0o755, 0o777, 0o4755, 0o640];
    const expected = new Map<string, { mode: number; mtimeMs: number; content: string }>();
    for (let d = 0; d < 12; d++) {
      await mkdir(join(dir, `d${d}/sub`), { recursive: true });
      for (let i = 0; i < 40; i++) {
        const path = `d${d}/${i % 2 ? 'sub/' : ''}f${i}.txt`;
        const mode = modes[(d + i) % modes.length] as number;
        const mtimeMs = Date.UTC(2024, 0, 1 + d, 0, i) as number;
        await writeFile(join(dir, path), `file ${path}\n`.repeat(i));
        await chmod(join(dir, path), mode);
        await utimes(join(dir, path), mtimeMs / 1000, mtimeMs / 1000);
        expected.set(path, { mode, mtimeMs, content: `file ${path}\n`.repeat(i) });
      }
    }
    await chmod(join(dir, 'd3'), 0o555);
    const snapshot = await bytesOf(encodeSnapshot(captureTree(dir, 'work')));
    await chmod(join(dir, 'd3'), 0o755);

    // Into an empty directory (nothing to look at first) and over a changed copy (in place).
    const empty = await tempDir();
    await restoreInto(empty, snapshot);
    await rm(join(dir, 'd5'), { recursive: true });
    await writeFile(join(dir, 'd5'), 'a file where a directory was');
    await rm(join(dir, 'd6/sub'), { recursive: true });
    await rm(join(dir, 'd7/f2.txt'));
    await mkdir(join(dir, 'd7/f2.txt/inner'), { recursive: true });
    await chmod(join(dir, 'd8/f0.txt'), 0o600);
    await restoreInto(dir, snapshot);
    for (const target of [empty, dir]) {
      for (const [path, want] of expected) {
        const stats = await lstat(join(target, path));
        expect({ path, mode: stats.mode & 0o7777, mtimeMs: Math.floor(stats.mtimeMs) }).toEqual({
          path,
          mode: want.mode,
          mtimeMs: want.mtimeMs,
        });
        expect(await readFile(join(target, path), 'utf8')).toBe(want.content);
      }
      expect((await stat(join(target, 'd3'))).mode & 0o777).toBe(0o555);
      await chmod(join(target, 'd3'), 0o755);
    }
  });

  it('compresses in gzip members any gzip reader takes, and reads a snapshot compressed as one stream', async () => {
    const dir = await tempDir();
    for (let i = 0; i < 6; i++) await writeFile(join(dir, `big${i}.bin`), Buffer.alloc(1 << 20, i));
    const snapshot = await bytesOf(encodeSnapshot(captureTree(dir, 'work')));
    let members = 0;
    for (let at = 0; at + 2 < snapshot.length; at++)
      if (snapshot[at] === 0x1f && snapshot[at + 1] === 0x8b && snapshot[at + 2] === 8) members++;
    expect(members).toBeGreaterThan(1);
    // One gzip stream of the same frames: how snapshots were compressed before members.
    const single = gzipSync(gunzipSync(snapshot), { level: 1 });
    const target = await tempDir();
    await restoreInto(target, single);
    for (let i = 0; i < 6; i++)
      expect((await readFile(join(target, `big${i}.bin`))).equals(Buffer.alloc(1 << 20, i))).toBe(true);
  });
});

describe('parallel restore of sized gzip members', () => {
  /** ~10 MB in files of every size class: over 1 MB (streamed), 300 KB, and small ones. */
  async function workspace(): Promise<{ dir: string; files: Map<string, Buffer> }> {
    const dir = await tempDir();
    const files = new Map<string, Buffer>();
    const text = Buffer.from(Array.from({ length: 4000 }, (_, i) => `line ${i} ${i * 7919}`).join('\n'));
    for (let i = 0; i < 6; i++) files.set(`large/f${i}.bin`, Buffer.concat([randomBytes(1 << 20), text]));
    for (let i = 0; i < 10; i++) files.set(`mid/f${i}.bin`, Buffer.concat([randomBytes(300_000), text]));
    for (let i = 0; i < 400; i++) files.set(`small/d${i % 8}/f${i}.txt`, randomBytes(i * 13));
    for (const [path, data] of files) {
      await mkdir(join(dir, path, '..'), { recursive: true });
      await writeFile(join(dir, path), data);
    }
    return { dir, files };
  }

  async function expectFiles(dir: string, files: Map<string, Buffer>): Promise<void> {
    for (const [path, data] of files) expect((await readFile(join(dir, path))).equals(data), path).toBe(true);
  }

  it('cuts members by their recorded length and inflates several at once, byte-exact; gunzip reads the stream', async () => {
    const { dir, files } = await workspace();
    const snapshot = await bytesOf(encodeSnapshot(captureTree(dir, 'work')));
    const stats = newInflateStats();
    const target = await tempDir();
    await restoreInto(target, snapshot, stats);
    await expectFiles(target, files);
    expect(stats.sizedMembers).toBeGreaterThan(INFLATE_IN_FLIGHT);
    expect(stats.maxInFlight).toBe(INFLATE_IN_FLIGHT);
    expect(stats.streamedBytes).toBe(0);
    // Still one gzip stream to the gzip tool: the member lengths ride in header extra fields.
    const frames = execFileSync('gunzip', ['-c'], { input: snapshot, maxBuffer: 64 << 20 });
    expect(frames.equals(gunzipSync(snapshot))).toBe(true);
    expect(frames.subarray(0, 22).toString()).toBe('SANDSTREAM-SNAPSHOT 1\n');
  });

  it('restores a snapshot whose members record no length (made before) as one stream, byte-exact', async () => {
    const { dir, files } = await workspace();
    const frames = gunzipSync(await bytesOf(encodeSnapshot(captureTree(dir, 'work'))));
    // The earlier layout: the frames in 1 MB blocks, each a plain gzip member.
    const blocks: Buffer[] = [];
    for (let at = 0; at < frames.length; at += 1 << 20)
      blocks.push(gzipSync(frames.subarray(at, at + (1 << 20)), { level: 1 }));
    const old = Buffer.concat(blocks);
    expect(blocks.length).toBeGreaterThan(1);
    const stats = newInflateStats();
    const target = await tempDir();
    await restoreInto(target, old, stats);
    await expectFiles(target, files);
    expect(stats).toEqual({ sizedMembers: 0, maxInFlight: 0, streamedBytes: old.length });
  });

  it('refuses a member whose recorded length was altered', async () => {
    const { dir } = await workspace();
    const snapshot = Buffer.from(await bytesOf(encodeSnapshot(captureTree(dir, 'work'))));
    // The first member's length, 20 bytes short: the cut lands inside its deflate data.
    snapshot.writeUInt32LE(snapshot.readUInt32LE(16) - 20, 16);
    await expect(restoreInto(await tempDir(), snapshot)).rejects.toThrow(/damaged/);
  });
});

describe('incompressible blocks', () => {
  it('stores random bytes instead of deflating them, compresses text, and restores both byte-exact', async () => {
    const random = randomBytes(1 << 20);
    const text = Buffer.from('the quick brown fox jumps over the lazy dog 0123456789\n'.repeat(20_000));
    expect(blockLevel(random, 1)).toBe(0);
    expect(blockLevel(text, 1)).toBe(1);
    // Half random, half text: compressed (the samples see both halves).
    expect(blockLevel(Buffer.concat([random.subarray(0, 1 << 19), text.subarray(0, 1 << 19)]), 1)).toBe(1);

    const dir = await tempDir();
    for (let i = 0; i < 4; i++) await writeFile(join(dir, `noise${i}.bin`), randomBytes(1 << 20));
    await writeFile(join(dir, 'text.txt'), text);
    const snapshot = await bytesOf(encodeSnapshot(captureTree(dir, 'work')));
    // Stored: the four random MB are in it at about their own size; the text shrank.
    expect(snapshot.length).toBeGreaterThan(4 << 20);
    expect(snapshot.length).toBeLessThan((4 << 20) + text.length / 4);
    // Still one gzip stream to other readers.
    expect(execFileSync('gunzip', ['-c'], { input: snapshot, maxBuffer: 64 << 20 }).length).toBeGreaterThan(
      (4 << 20) + text.length,
    );
    const target = await tempDir();
    await restoreInto(target, snapshot);
    execFileSync('diff', ['-r', dir, target]);
  });
});
