import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CaptureCache } from './capture-cache.js';

let root: string;
const caches: CaptureCache[] = [];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'capture-cache-test-'));
});
afterEach(async () => {
  await Promise.all(caches.splice(0).map((c) => c.close()));
  await rm(root, { recursive: true, force: true });
});

function cacheOf(options: { maxBytes?: number; maxAgeMs?: number; now?: () => number } = {}) {
  const cache = new CaptureCache({ root, maxBytes: 1 << 20, maxAgeMs: 60_000, ...options });
  caches.push(cache);
  return cache;
}

async function* chunksOf(bytes: Buffer): AsyncGenerator<Buffer> {
  for (let i = 0; i < bytes.length; i += 16_384) yield bytes.subarray(i, i + 16_384);
}

const digest = (bytes: Buffer) => ({
  sizeBytes: bytes.length,
  sha256: createHash('sha256').update(bytes).digest('hex'),
});

async function readAll(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

/** Whether the cache hands the bytes out (the stream is read, so its descriptor closes). */
async function held(cache: CaptureCache, snapshotId: string, bytes: Buffer): Promise<boolean> {
  const opened = await cache.open(snapshotId, digest(bytes));
  return opened !== undefined && (await readAll(opened)).equals(bytes);
}

async function keep(cache: CaptureCache, snapshotId: string, bytes: Buffer) {
  const spooled = await cache.spool(snapshotId, chunksOf(bytes));
  await spooled.keep();
  spooled.read().destroy(); // the upload's read, not needed here: its descriptor closes
  return spooled;
}

describe('CaptureCache', () => {
  it('spools a capture hashing it, reads it back for the upload, and hands it out after keep', async () => {
    const cache = cacheOf();
    const bytes = randomBytes(5000);
    const spooled = await cache.spool('snap-a', chunksOf(bytes));
    expect({ sizeBytes: spooled.sizeBytes, sha256: spooled.sha256 }).toEqual(digest(bytes));
    expect((await readAll(spooled.read())).equals(bytes)).toBe(true);
    expect(await cache.open('snap-a', digest(bytes))).toBeUndefined(); // not kept yet
    const woken = cache.nextChange();
    await spooled.keep();
    await woken; // a start waiting for its snapshot hears of the keep
    const opened = await cache.open('snap-a', digest(bytes));
    expect(opened).toBeDefined();
    expect((await readAll(opened as Readable)).equals(bytes)).toBe(true);
    expect(cache.size).toEqual({ bytes: 5000, entries: 1 });
  });

  it('refuses a damaged or cut entry, drops it and says why (the caller reads the store)', async () => {
    const cache = cacheOf();
    const bytes = randomBytes(4000);
    await keep(cache, 'snap-b', bytes);
    const [file] = await readdir(cache.directory);
    const damaged = Buffer.from(bytes);
    damaged[100] = (damaged[100] ?? 0) ^ 0xff;
    await writeFile(join(cache.directory, file as string), damaged);
    const reasons: string[] = [];
    expect(await cache.open('snap-b', digest(bytes), (r) => reasons.push(r))).toBeUndefined();
    expect(reasons[0]).toMatch(/cached capture of snap-b .* read from the store instead/);
    expect(cache.size).toEqual({ bytes: 0, entries: 0 });
    expect(await readdir(cache.directory)).toEqual([]);

    await keep(cache, 'snap-c', bytes);
    const [cut] = await readdir(cache.directory);
    await writeFile(join(cache.directory, cut as string), bytes.subarray(0, 10));
    expect(await cache.open('snap-c', digest(bytes))).toBeUndefined();
    // A record that names other bytes than the cached ones is refused the same way.
    await keep(cache, 'snap-d', bytes);
    expect(await cache.open('snap-d', digest(randomBytes(4000)))).toBeUndefined();
  });

  it('keeps at most maxBytes, the oldest going first, and never a capture larger than the bound', async () => {
    const cache = cacheOf({ maxBytes: 2500 });
    const kept = [randomBytes(1000), randomBytes(1000), randomBytes(1000)];
    for (const [i, bytes] of kept.entries()) await keep(cache, `snap-${i}`, bytes);
    expect(cache.size).toEqual({ bytes: 2000, entries: 2 });
    expect(await cache.open('snap-0', digest(kept[0] as Buffer))).toBeUndefined();
    expect(await held(cache, 'snap-2', kept[2] as Buffer)).toBe(true);
    expect((await readdir(cache.directory)).length).toBe(2);

    await keep(cache, 'too-big', randomBytes(3000));
    expect(cache.size).toEqual({ bytes: 2000, entries: 2 });
    expect((await readdir(cache.directory)).length).toBe(2);
  });

  it('hands nothing out past the age bound and removes it; close removes the directory', async () => {
    let now = 1_000_000;
    const cache = cacheOf({ maxAgeMs: 5000, now: () => now });
    const bytes = randomBytes(2000);
    await keep(cache, 'snap-old', bytes);
    await keep(cache, 'snap-swept', bytes);
    now += 4000;
    expect(await held(cache, 'snap-old', bytes)).toBe(true);
    now += 2000;
    expect(await cache.open('snap-old', digest(bytes))).toBeUndefined();
    await cache.sweep();
    expect(cache.size).toEqual({ bytes: 0, entries: 0 });
    expect(await readdir(cache.directory)).toEqual([]);
    const dir = cache.directory;
    await cache.close();
    expect(existsSync(dir)).toBe(false);
  });

  it('an open reader keeps its bytes when the entry is evicted meanwhile (concurrent forks)', async () => {
    const cache = cacheOf({ maxBytes: 300_000 });
    const bytes = randomBytes(200_000);
    await keep(cache, 'snap-x', bytes);
    const readers = await Promise.all([1, 2, 3].map(() => cache.open('snap-x', digest(bytes))));
    await keep(cache, 'snap-y', randomBytes(200_000)); // evicts snap-x
    expect(await cache.open('snap-x', digest(bytes))).toBeUndefined();
    for (const reader of readers) expect((await readAll(reader as Readable)).equals(bytes)).toBe(true);
  });

  it('a capture being spooled is read as it grows, whole and in order; one that fails fails its reader', async () => {
    const cache = cacheOf();
    const bytes = randomBytes(3 * 1024 * 1024 + 123);
    let release!: () => void;
    const halfway = new Promise<void>((r) => {
      release = r;
    });
    let reached!: () => void;
    const started = new Promise<void>((r) => {
      reached = r;
    });
    async function* slow(): AsyncGenerator<Buffer> {
      yield bytes.subarray(0, 1_000_000);
      reached();
      await halfway; // the rest only once a reader follows
      for (let i = 1_000_000; i < bytes.length; i += 500_000) yield bytes.subarray(i, i + 500_000);
    }
    expect(cache.follow('snap-g')).toBeUndefined();
    const spooling = cache.spool('snap-g', slow());
    await started;
    expect(cache.isSpooling('snap-g')).toBe(true);
    const follower = cache.follow('snap-g') as Readable;
    const read = readAll(follower);
    release();
    (await spooling).read().destroy();
    expect((await read).equals(bytes)).toBe(true);
    expect(cache.isSpooling('snap-g')).toBe(false);

    let fail!: () => void;
    const failing = new Promise<void>((r) => {
      fail = r;
    });
    async function* broken(): AsyncGenerator<Buffer> {
      yield randomBytes(100_000);
      await failing;
      throw new Error('capture broke mid-way');
    }
    const spooled = cache.spool('snap-h', broken());
    spooled.catch(() => {});
    while (!cache.isSpooling('snap-h')) await new Promise((r) => setTimeout(r, 5));
    const reader = readAll(cache.follow('snap-h') as Readable);
    fail();
    await expect(reader).rejects.toThrow('capture broke mid-way');
  });

  it('a capture that fails while spooling leaves no file behind', async () => {
    const cache = cacheOf();
    async function* failing(): AsyncGenerator<Buffer> {
      yield randomBytes(1000);
      throw new Error('capture broke');
    }
    await expect(cache.spool('snap-f', failing())).rejects.toThrow('capture broke');
    expect(await readdir(cache.directory)).toEqual([]);
  });

  it("removes a dead process's directory once it and its files are older than the age bound, at start and in its sweep", async () => {
    const dirOf = (name: string) => join(root, `sandstream-captures-${name}`);
    const old = new Date(Date.now() - 120_000);
    const make = async (name: string, stale: { dir: boolean; file: boolean }) => {
      await mkdir(dirOf(name));
      await writeFile(join(dirOf(name), 'snap'), 'x');
      if (stale.file) await utimes(join(dirOf(name), 'snap'), old, old);
      if (stale.dir) await utimes(dirOf(name), old, old);
    };
    await make('1-dead', { dir: true, file: true });
    await make('2-live', { dir: false, file: false });
    // A live replica's long capture: its directory old, its spool still being written.
    await make('3-spooling', { dir: true, file: false });
    const cache = cacheOf({ maxAgeMs: 60_000 });
    await keep(cache, 'snap-n', randomBytes(10));
    expect(existsSync(dirOf('1-dead'))).toBe(false);
    expect(await readFile(join(dirOf('2-live'), 'snap'), 'utf8')).toBe('x');
    expect(await readFile(join(dirOf('3-spooling'), 'snap'), 'utf8')).toBe('x');

    // One that dies later goes at the next sweep; the cache's own directory never does.
    await make('4-died-later', { dir: true, file: true });
    await utimes(cache.directory, old, old);
    await cache.sweep();
    expect(existsSync(dirOf('4-died-later'))).toBe(false);
    expect(existsSync(cache.directory)).toBe(true);
  });
});
