import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  createKeySpace,
  DEFAULT_SNAPSHOT_LIMITS,
  newSnapshotId,
  SnapshotRecords,
  SnapshotStore,
} from '@sandstream/bus';
import {
  captureTree,
  copyTree,
  decodeSnapshot,
  encodeCopiedTrees,
  encodeSnapshot,
  replaceTreeContents,
  type SandboxBackend,
  type SandboxRef,
  TreeRestore,
  wasCheckedWhole,
} from '@sandstream/sandbox';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, NatsServer, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CaptureCache } from './capture-cache.js';
import { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';
import { StartSnapshot } from './start-from-snapshot.js';

// Issue 30 §7: a fork placed on the replica that captured restores from the plain copy of the
// capture (local-copies.ts); a copy that changed after it was made is refused and the start
// restores from the stored snapshot. Real Redis (records, freeze lease), a real JetStream object
// store, the real cache and restore code. The "sandbox" is a directory: what the in-process
// backend's restores write into (its work tree), without an agent process to freeze.

const redis = new Redis(testRedisUrl());
const namespace = uniqueNamespace('startsnap');
const keys = createKeySpace(namespace);
const tenant = 't1';
let nats: NatsServer;
let nc: NatsConnection;
let root: string;
let cache: CaptureCache;

/** A directory standing for a sandbox's work tree, restored with the library's own code. */
const directoryBackend = {
  kind: 'inprocess',
  async restoreFiles(ref: SandboxRef, snapshot: AsyncIterable<Buffer>) {
    const tree = new TreeRestore(ref.id, 'work');
    try {
      for await (const restored of decodeSnapshot(snapshot)) await tree.apply(restored);
      return { ...(await tree.finish()), frozenMs: 0 };
    } finally {
      tree.close();
    }
  },
  async restoreCopy(ref: SandboxRef, from: string) {
    return { ...(await replaceTreeContents(ref.id, join(from, 'work'))), frozenMs: 0 };
  },
  async thaw() {},
} as unknown as SandboxBackend;

beforeAll(async () => {
  nats = await NatsServer.start({ jetstream: true });
  nc = await connect({ servers: nats.url });
  root = await mkdtemp(join(tmpdir(), 'start-snapshot-test-'));
  cache = new CaptureCache({ root: join(root, 'cache'), maxBytes: 1 << 30, maxAgeMs: 60_000 });
}, 60_000);

afterAll(async () => {
  await cache?.close();
  await nc?.close();
  await nats?.stop();
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
  await rm(root, { recursive: true, force: true });
});

/** What a fork's capture leaves on this replica: a stored, committed snapshot and its plain copy. */
async function forkCapture(source: string) {
  const records = new SnapshotRecords(redis, keys);
  const objects = new SnapshotStore(nc, namespace);
  const snapshotId = newSnapshotId();
  await records.begin(
    { snapshotId, tenant, fromSandbox: 'src', spec: {}, backend: 'inprocess', createdAt: Date.now() },
    DEFAULT_SNAPSHOT_LIMITS,
  );
  const made = await cache.copies.make(snapshotId, (into) => copyTree(source, join(into, 'work')));
  const stored = await objects.put(snapshotId, encodeCopiedTrees(made.dir, ['work']));
  await records.commit(
    tenant,
    snapshotId,
    { ...stored, entries: made.listing.entries, frozenMs: 0 },
    DEFAULT_SNAPSHOT_LIMITS,
  );
  return { snapshotId, made, records, objects };
}

async function sourceTree(): Promise<string> {
  const source = await mkdtemp(join(root, 'source-'));
  await mkdir(join(source, 'd/e'), { recursive: true });
  await writeFile(join(source, 'd/random.bin'), randomBytes(200_000));
  await writeFile(join(source, 'd/e/run.sh'), '#!/bin/sh\n');
  await chmod(join(source, 'd/e/run.sh'), 0o750);
  await symlink('d/random.bin', join(source, 'link'));
  return source;
}

/** A fresh "sandbox" holding a file the snapshot does not have. */
async function newSandbox(): Promise<SandboxRef> {
  const dir = await mkdtemp(join(root, 'sandbox-'));
  await writeFile(join(dir, 'stale.txt'), 'not in the snapshot');
  return { jobId: `job-${randomBytes(4).toString('hex')}`, backend: 'inprocess', id: dir };
}

async function entriesOf(dir: string): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const { entry, content } of decodeSnapshot(encodeSnapshot(captureTree(dir, 'work')))) {
    const parts: Buffer[] = [];
    for await (const chunk of content) parts.push(chunk);
    out.push({ ...entry, content: Buffer.concat(parts).toString('base64') });
  }
  return out;
}

function startsWith(records: SnapshotRecords, objects: SnapshotStore, backend = directoryBackend) {
  const opened: string[] = [];
  const refused: string[] = [];
  const starts = {
    source: {
      records,
      objects,
      backend,
      cache,
      onCacheRefused: (reason: string) => refused.push(reason),
      onOpened: (_: string, from: string) => opened.push(from),
    },
    backend,
    freeze: new SnapshotFreezeGuard({ redis, keys, backend, logger: silentLogger('t') }),
  };
  return { starts, opened, refused };
}

describe('a start from a snapshot on the replica that copied it', () => {
  it('restores from the plain copy: the same files, modes and symlinks as the source', async () => {
    const source = await sourceTree();
    const { snapshotId, records, objects } = await forkCapture(source);
    const { starts, opened, refused } = startsWith(records, objects);
    const sandbox = await newSandbox();
    const timings = await new StartSnapshot(starts, snapshotId, tenant).restoreInto(sandbox.jobId, sandbox);
    expect(timings.fromCopy).toBe(true);
    expect(opened).toEqual(['copy']);
    expect(refused).toEqual([]);
    expect(await entriesOf(sandbox.id)).toEqual(await entriesOf(source));
  }, 60_000);

  it('a copy changed after it was made is refused, and the files come from the stored snapshot', async () => {
    const source = await sourceTree();
    const { snapshotId, made, records, objects } = await forkCapture(source);
    // Damaged on disk: same size, other bytes.
    await writeFile(join(made.dir, 'work/d/random.bin'), randomBytes(200_000));
    const { starts, opened, refused } = startsWith(records, objects);
    const sandbox = await newSandbox();
    const timings = await new StartSnapshot(starts, snapshotId, tenant).restoreInto(sandbox.jobId, sandbox);
    expect(timings.fromCopy).toBeUndefined();
    // The copy was opened, refused at the restore, and the stored bytes read instead.
    expect(opened).toEqual(['copy', 'store']);
    expect(refused).toEqual([
      expect.stringContaining(`the local copy of ${snapshotId} changed after it was made`),
    ]);
    expect(await entriesOf(sandbox.id)).toEqual(await entriesOf(source));
    expect(cache.copies.has(snapshotId)).toBe(false);
  }, 60_000);

  it("a snapshot that does not exist, or is another tenant's, is refused by name, copy or not", async () => {
    const source = await sourceTree();
    const { snapshotId, records, objects } = await forkCapture(source);
    const { starts } = startsWith(records, objects);
    const sandbox = await newSandbox();
    const missing = newSnapshotId();
    await expect(
      new StartSnapshot(starts, missing, tenant).restoreInto(sandbox.jobId, sandbox),
    ).rejects.toThrow(new RegExp(`snapshot ${missing} not found`));
    await expect(
      new StartSnapshot(starts, snapshotId, 't2').restoreInto(sandbox.jobId, sandbox),
    ).rejects.toThrow(new RegExp(`snapshot ${snapshotId} not found`));
  }, 60_000);

  it('a copy gone from the disk falls back to the stored snapshot too', async () => {
    const source = await sourceTree();
    const { snapshotId, made, records, objects } = await forkCapture(source);
    await rm(made.dir, { recursive: true, force: true });
    const { starts, opened, refused } = startsWith(records, objects);
    const sandbox = await newSandbox();
    const timings = await new StartSnapshot(starts, snapshotId, tenant).restoreInto(sandbox.jobId, sandbox);
    expect(timings.fromCopy).toBeUndefined();
    expect(opened).toEqual(['copy', 'store']);
    expect(refused).toEqual([expect.stringContaining(`the local copy of ${snapshotId} cannot be listed`)]);
    expect(await entriesOf(sandbox.id)).toEqual(await entriesOf(source));
  }, 60_000);
});

describe('the bytes a start restores from', () => {
  it('reach the backend marked checked whole, from the store and from the cache', async () => {
    const source = await sourceTree();
    const { snapshotId, made, records, objects } = await forkCapture(source);
    // No copy: the start reads the snapshot's bytes.
    await rm(made.dir, { recursive: true, force: true });
    const marked: boolean[] = [];
    const backend = {
      ...directoryBackend,
      restoreFiles(ref: SandboxRef, snapshot: AsyncIterable<Buffer>) {
        // The decoder skips its own SHA-256 of the content for these (checked-whole.ts).
        marked.push(wasCheckedWhole(snapshot));
        return directoryBackend.restoreFiles?.(ref, snapshot);
      },
    } as SandboxBackend;
    const { starts, opened } = startsWith(records, objects, backend);
    const fromStore = await newSandbox();
    await new StartSnapshot(starts, snapshotId, tenant).restoreInto(fromStore.jobId, fromStore);

    // The same bytes held in this replica's cache, as a capture spooled here leaves them.
    const record = await records.get(snapshotId, tenant);
    const spooled = await cache.spool(
      snapshotId,
      await objects.open(snapshotId, { sizeBytes: record?.sizeBytes ?? 0, sha256: record?.sha256 ?? '' }),
    );
    await spooled.keep();
    const fromCache = await newSandbox();
    await new StartSnapshot(starts, snapshotId, tenant).restoreInto(fromCache.jobId, fromCache);

    // The first start finds the copy gone (and drops it), then reads the store.
    expect(opened).toEqual(['copy', 'store', 'cache']);
    expect(marked).toEqual([true, true]);
    for (const sandbox of [fromStore, fromCache])
      expect(await entriesOf(sandbox.id)).toEqual(await entriesOf(source));
  }, 60_000);
});
