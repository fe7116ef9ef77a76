import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { copyTree } from '@sandstream/sandbox';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LocalCopies } from './local-copies.js';

// The plain copies a fork's capture leaves for the forks placed on its node (issue 30 §7).

let root: string;
let source: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'local-copies-test-'));
  source = join(root, 'source');
  await mkdir(join(source, 'd'), { recursive: true });
  await writeFile(join(source, 'd/f.txt'), 'x'.repeat(1000));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const copiesOf = (options: { maxBytes?: number; maxAgeMs?: number; now?: () => number } = {}) =>
  new LocalCopies({ dir: join(root, 'copies'), maxBytes: 10_000, maxAgeMs: 60_000, ...options });
const copyWork = (into: string) => copyTree(source, join(into, 'work'));

describe('LocalCopies', () => {
  it('hands a copy out to a start that asked while it was being made, checked and kept until released', async () => {
    const copies = copiesOf();
    let finishCopy!: () => void;
    const finished = new Promise<void>((resolve) => {
      finishCopy = resolve;
    });
    const making = copies.make('snap-a', async (into) => {
      await finished;
      await copyWork(into);
    });
    expect(copies.has('snap-a')).toBe(true);
    const asked = copies.acquire('snap-a');
    await new Promise((resolve) => setTimeout(resolve, 20));
    finishCopy();
    const made = await making;
    expect(made.listing).toMatchObject({ entries: 3, bytes: 1000 });
    const lease = await asked;
    expect(lease?.dir).toBe(made.dir);
    expect(await lease?.check()).toBeUndefined();
    // Dropped while in use (its capture failed): on disk until the restore lets go of it.
    await copies.forget('snap-a');
    expect(existsSync(made.dir)).toBe(true);
    expect(await copies.acquire('snap-a')).toBeUndefined();
    lease?.release();
    // Removed in the background once released.
    await vi.waitFor(() => expect(existsSync(made.dir)).toBe(false), { timeout: 10_000 });
  });

  it('refuses a copy changed after it was made, says why and drops it (the start reads the snapshot)', async () => {
    const copies = copiesOf();
    const reasons: string[] = [];
    const { dir } = await copies.make('snap-b', copyWork);
    await writeFile(join(dir, 'work/d/f.txt'), 'y'.repeat(1000));
    const lease = await copies.acquire('snap-b', (reason) => reasons.push(reason));
    expect(await lease?.check()).toMatch(/the local copy of snap-b changed after it was made/);
    expect(reasons).toHaveLength(1);
    lease?.release();
    expect(copies.has('snap-b')).toBe(false);
    expect(await copies.acquire('snap-b')).toBeUndefined();
    await vi.waitFor(() => expect(existsSync(dir)).toBe(false), { timeout: 10_000 });
  });

  it('a copy that fails leaves nothing, and a start waiting for it hears there is none', async () => {
    const copies = copiesOf();
    const making = copies.make('snap-c', async (into) => {
      await copyWork(into);
      throw new Error('disk full');
    });
    const asked = copies.acquire('snap-c');
    await expect(making).rejects.toThrow('disk full');
    expect(await asked).toBeUndefined();
    expect(copies.has('snap-c')).toBe(false);
    expect(await readdir(join(root, 'copies'))).toEqual([]);
  });

  it('keeps at most maxBytes (oldest out first) and nothing past the age bound', async () => {
    let now = 0;
    const copies = copiesOf({ maxBytes: 2500, maxAgeMs: 1000, now: () => now });
    for (const id of ['snap-1', 'snap-2', 'snap-3']) await copies.make(id, copyWork);
    expect(copies.size).toEqual({ bytes: 2000, entries: 2 });
    expect(copies.has('snap-1')).toBe(false);
    now = 5000;
    expect(await copies.acquire('snap-3')).toBeUndefined();
    await copies.sweep();
    expect(copies.size).toEqual({ bytes: 0, entries: 0 });
    expect(await readdir(join(root, 'copies'))).toEqual([]);
  });
  it("holds a fork's upload (unused) until the forks placed here are done restoring from the copy, or until its deadline", async () => {
    const copies = copiesOf();
    await copies.make('snap-u', copyWork);
    const settledAfter = async (waiting: Promise<void>, ms: number) =>
      Promise.race([waiting.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
    // No copy: nothing to yield to.
    expect(await settledAfter(copies.unused('snap-none', Date.now() + 5000, 2), 50)).toBe(true);
    // Two forks named: it waits for both restores, though no restore holds the copy yet.
    const waiting = copies.unused('snap-u', Date.now() + 10_000, 2);
    const first = await copies.acquire('snap-u');
    const second = await copies.acquire('snap-u');
    first?.release();
    expect(await settledAfter(waiting, 50)).toBe(false);
    second?.release();
    expect(await settledAfter(waiting, 1000)).toBe(true);
    // A fork placed on another node never restores here: the deadline ends the wait.
    const started = Date.now();
    await copies.unused('snap-u', Date.now() + 100, 3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
