import { Readable } from 'node:stream';
import {
  createKeySpace,
  DEFAULT_SNAPSHOT_LIMITS,
  newSnapshotId,
  SnapshotRecords,
  SnapshotStore,
  snapshotBucketName,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, NatsServer, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { connect, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SnapshotReaper } from './snapshot-reaper.js';

// What a crash mid-snapshot leaves, and what retention ends: an `uploading` record never listed,
// chunks with no object; the reaper deletes each after its grace, and expired snapshots with
// their bytes. A private nats-server with JetStream, the shared Redis under its own namespace.
let server: NatsServer;
let nc: NatsConnection;
const redis = new Redis(testRedisUrl());
const namespace = uniqueNamespace('snap-reap');
const keys = createKeySpace(namespace);
const records = new SnapshotRecords(redis, keys);
let objects: SnapshotStore;

beforeAll(async () => {
  server = await NatsServer.start({ jetstream: true });
  nc = await connect({ servers: server.url });
  objects = new SnapshotStore(nc, namespace);
});
afterAll(async () => {
  await nc?.close();
  await server?.stop();
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
});

const base = (snapshotId: string) => ({
  snapshotId,
  tenant: 't1',
  fromSandbox: 'sb-1',
  spec: { image: 'x' },
  backend: 'inprocess',
  createdAt: Date.now(),
});

describe('SnapshotReaper', () => {
  it('deletes an upload a crash left (record unlisted, chunks with no object) after the grace, and expired snapshots with their bytes', async () => {
    const limits = { ...DEFAULT_SNAPSHOT_LIMITS, uploadGraceMs: 1000, retentionMs: 1000 };
    // A complete snapshot, past its retention by the reaper's clock.
    const done = newSnapshotId();
    await records.begin(base(done), limits);
    const stored = await objects.put(done, Readable.from([Buffer.from('bytes of a snapshot')]));
    await records.commit('t1', done, { ...stored, entries: 1, frozenMs: 0 }, limits);
    expect((await records.list('t1')).map((r) => r.snapshotId)).toEqual([done]);

    // An upload killed mid-way: its record stays `uploading`, its chunks are in the stream, no object names them.
    const dead = newSnapshotId();
    await records.begin(base(dead), limits);
    const bucket = snapshotBucketName(namespace);
    const js = nc.jetstream();
    for (let i = 0; i < 3; i++)
      await js.publish(`$O.${bucket}.C.deadnuid${dead.slice(5)}`, new Uint8Array(1000));
    expect((await records.list('t1')).map((r) => r.snapshotId)).not.toContain(dead);
    expect(await records.get(dead, 't1')).toBeNull();

    // Stored bytes no record names (a snapshot rm'd through the SDK, which leaves them to the reaper).
    const orphan = newSnapshotId();
    await objects.put(orphan, Readable.from([Buffer.from('left behind')]));

    let clock = Date.now() + 5000;
    const reaper = new SnapshotReaper({
      records,
      objects,
      uploadGraceMs: 60_000,
      logger: silentLogger('snap-reap'),
      now: () => clock,
    });
    const first = await reaper.runOnce();
    expect(first).toMatchObject({ expired: 2, orphanObjects: 1, orphanChunks: 0 });
    expect(await records.read(done)).toBeNull();
    expect(await records.read(dead)).toBeNull();
    expect(await objects.names()).toEqual([]);
    expect(await redis.hgetall(keys.snapshots.usage('t1'))).toMatchObject({ count: '0', bytes: '0' });
    // The chunks stay until they have been unreferenced for the grace (an upload may be under way).
    expect(await objects.unreferencedChunks()).toEqual([{ nuid: `deadnuid${dead.slice(5)}`, chunks: 3 }]);
    // An upload slower than the grace is still adding chunks: the grace runs from its last growth.
    clock += 60_000;
    await js.publish(`$O.${bucket}.C.deadnuid${dead.slice(5)}`, new Uint8Array(1000));
    expect(await reaper.runOnce()).toMatchObject({ orphanChunks: 0 });
    clock += 59_000;
    expect(await reaper.runOnce()).toMatchObject({ orphanChunks: 0 });
    clock += 1_000;
    expect(await reaper.runOnce()).toMatchObject({ orphanChunks: 1 });
    expect(await objects.unreferencedChunks()).toEqual([]);
  }, 60_000);
  it("collects a fork's temporary snapshot whose dropper died after its commit: unlisted, gone one upload grace after the commit, not after the retention", async () => {
    const limits = { ...DEFAULT_SNAPSHOT_LIMITS, uploadGraceMs: 60_000, retentionMs: 7 * 24 * 3600_000 };
    const temporary = newSnapshotId();
    await records.begin(base(temporary), limits);
    const stored = await objects.put(temporary, Readable.from([Buffer.from('a fork capture')]));
    const committed = await records.commit('t1', temporary, { ...stored, entries: 1, frozenMs: 0 }, limits, {
      temporary: true,
    });
    // Ready (its forks elsewhere read it), never listed; its record expires with the upload grace.
    expect(committed.state).toBe('ready');
    expect(committed.expiresAt - committed.createdAt).toBe(limits.uploadGraceMs);
    expect((await records.list('t1')).map((r) => r.snapshotId)).not.toContain(temporary);
    // Its pod-lifecycle was killed before it dropped it: nothing does but the reaper.
    let clock = committed.createdAt + limits.uploadGraceMs - 1;
    const reaper = new SnapshotReaper({
      records,
      objects,
      uploadGraceMs: limits.uploadGraceMs,
      logger: silentLogger('snap-reap'),
      now: () => clock,
    });
    expect(await reaper.runOnce()).toMatchObject({ expired: 0 });
    expect(await records.read(temporary)).not.toBeNull();
    clock += 2;
    expect(await reaper.runOnce()).toMatchObject({ expired: 1 });
    expect(await records.read(temporary)).toBeNull();
    expect(await objects.names()).not.toContain(temporary);
    expect(await redis.hgetall(keys.snapshots.usage('t1'))).toMatchObject({ count: '0', bytes: '0' });
  }, 60_000);
});
