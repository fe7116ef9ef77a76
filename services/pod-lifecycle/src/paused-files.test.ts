import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import type { PausedFilesStore } from '@sandstream/bus';
import { type SandboxBackend, type SandboxRef, wasCheckedWhole } from '@sandstream/sandbox';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CaptureCache } from './capture-cache.js';
import { PausedFiles } from './paused-files.js';
import type { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';

describe('a resume restoring a pause’s files', () => {
  it('hands the backend the stored bytes marked checked whole (the store found them whole)', async () => {
    const stored = Readable.from([Buffer.from('snapshot bytes')]);
    const store: PausedFilesStore = {
      put: async () => 'kept',
      located: () => ({ objectId: 'kept', sizeBytes: 14, sha256: '0'.repeat(64) }),
      get: async () => stored,
      stream: () => stored,
      delete: async () => {},
    };
    const restored: Array<{ same: boolean; checked: boolean }> = [];
    const backend = {
      kind: 'inprocess',
      async restoreFiles(_ref: SandboxRef, snapshot: AsyncIterable<Buffer>) {
        restored.push({ same: snapshot === stored, checked: wasCheckedWhole(snapshot) });
        return { entries: 0, bytes: 0, removed: 0, frozenMs: 0 };
      },
    } as unknown as SandboxBackend;
    // No lease to take here: the guard's own tests cover it.
    const freeze = { hold: (_id: string, _ref: SandboxRef, run: () => Promise<unknown>) => run() };
    const files = new PausedFiles(backend, freeze as unknown as SnapshotFreezeGuard, store);
    await files.restore({ jobId: 'job-1', backend: 'inprocess', id: 'sandbox-1' }, files.fetch('kept'));
    expect(restored).toEqual([{ same: true, checked: true }]);
  });
});

describe('a pause spooled in the capture cache', () => {
  const bytes = Buffer.from('kept files, as the capture encoded them '.repeat(1000));
  const sha256 = createHash('sha256').update(bytes).digest('hex');

  /** A store that keeps what it was given, in memory, and says which reads it served. */
  function memoryStore() {
    const objects = new Map<string, Buffer>();
    const reads: string[] = [];
    const deleted: string[] = [];
    const located = (kept: string) =>
      JSON.parse(kept) as { objectId: string; sizeBytes: number; sha256: string };
    const store: PausedFilesStore = {
      put: async (stream, _owner, objectId = 'unnamed') => {
        const parts: Buffer[] = [];
        for await (const part of stream) parts.push(part as Buffer);
        const whole = Buffer.concat(parts);
        objects.set(objectId, whole);
        return JSON.stringify({
          objectId,
          sizeBytes: whole.length,
          sha256: createHash('sha256').update(whole).digest('hex'),
        });
      },
      located,
      get: async (kept) => {
        reads.push(`get ${located(kept).objectId}`);
        return Readable.from([objects.get(located(kept).objectId) as Buffer]);
      },
      stream: (kept) => {
        reads.push(`stream ${located(kept).objectId}`);
        return Readable.from([objects.get(located(kept).objectId) as Buffer]);
      },
      delete: async (kept) => {
        deleted.push(located(kept).objectId);
      },
    };
    return { store, objects, reads, deleted };
  }

  function backendRestoring(restored: Buffer[]): SandboxBackend {
    return {
      kind: 'inprocess',
      restoresWhileBooting: true,
      async captureFiles() {
        return { stream: Readable.from([bytes]), done: Promise.resolve({ frozenMs: 1 }), parts: ['work'] };
      },
      async restoreFiles(_ref: SandboxRef, snapshot: AsyncIterable<Buffer>) {
        const parts: Buffer[] = [];
        for await (const part of snapshot) parts.push(part);
        restored.push(Buffer.concat(parts));
        return { entries: 0, bytes: 0, removed: 0, frozenMs: 0 };
      },
    } as unknown as SandboxBackend;
  }

  const freeze = { hold: (_id: string, _ref: SandboxRef, run: () => Promise<unknown>) => run() };
  const ref = { jobId: 'job-1', backend: 'inprocess', id: 'sandbox-1' };
  const owner = { sandboxId: 'sb-1', tenant: 'acme' };
  let root: string;
  let cache: CaptureCache;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'sandstream-pfc-'));
    cache = new CaptureCache({ root, maxBytes: 100 * 1024 * 1024, maxAgeMs: 60_000 });
  });
  afterEach(async () => {
    await cache.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('stores the capture and restores a resume here from the local spool, not the store', async () => {
    const { store, objects, reads, deleted } = memoryStore();
    const restored: Buffer[] = [];
    const files = new PausedFiles(
      backendRestoring(restored),
      freeze as unknown as SnapshotFreezeGuard,
      store,
      cache,
    );
    const kept = await files.keep(ref, owner);
    const { objectId } = store.located(kept);
    expect(objectId.startsWith('pause-sb-1-')).toBe(true);
    expect(objects.get(objectId)?.equals(bytes)).toBe(true);
    expect(cache.held(objectId)).toEqual({ sizeBytes: bytes.length, sha256 });

    await files.restore(ref, files.fetch(kept));
    expect(restored).toHaveLength(1);
    expect(restored[0]?.equals(bytes)).toBe(true);
    expect(reads).toEqual([]);

    await files.discard(kept);
    expect(cache.held(objectId)).toBeUndefined();
    expect(deleted).toEqual([objectId]);
  });

  it('reads the store when the local spool is damaged, saying why', async () => {
    const { store, reads } = memoryStore();
    const restored: Buffer[] = [];
    const refused: string[] = [];
    const files = new PausedFiles(
      backendRestoring(restored),
      freeze as unknown as SnapshotFreezeGuard,
      store,
      cache,
      (reason) => refused.push(reason),
    );
    const kept = await files.keep(ref, owner);
    const { objectId } = store.located(kept);
    for (const name of readdirSync(cache.directory)) writeFileSync(join(cache.directory, name), 'damaged');

    await files.restore(ref, files.fetch(kept));
    expect(restored[0]?.equals(bytes)).toBe(true);
    expect(reads).toEqual([`stream ${objectId}`]);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toContain(objectId);
  });

  it('leaves a kept reference it cannot read to the store to refuse, the spool untouched', async () => {
    const { store } = memoryStore();
    const asked: string[] = [];
    // A real store's delete refuses such a reference; this one records it, to see that discard
    // got as far as asking.
    const lenient: PausedFilesStore = {
      ...store,
      delete: async (kept) => {
        asked.push(kept);
      },
    };
    const files = new PausedFiles(
      backendRestoring([]),
      freeze as unknown as SnapshotFreezeGuard,
      lenient,
      cache,
    );
    const kept = await files.keep(ref, owner);
    const { objectId } = store.located(kept);

    await files.discard('not a kept reference');
    expect(asked).toEqual(['not a kept reference']);
    expect(cache.held(objectId)).toEqual({ sizeBytes: bytes.length, sha256 });
  });
});
