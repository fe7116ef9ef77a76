import { Readable } from 'node:stream';
import {
  createKeySpace,
  DispatchKeys,
  ExpiredLeases,
  JobStore,
  PausedFilesQuota,
  parseLiveSandboxSpec,
  pausedFilesStoreOf,
  pausedObjectKept,
  SnapshotRecords,
  SnapshotStore,
  sandboxRecordOf,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { connect as connectNats } from 'nats';
import { afterAll, describe, expect, it } from 'vitest';
import { Reaper } from './reaper.js';
import { SnapshotReaper } from './snapshot-reaper.js';

// Paused sandboxes are kept for their spec's pausedRetentionSeconds, capped by the operator's
// SANDBOX_MAX_PAUSED_RETENTION_SECONDS; past it the reaper closes them (closed, paused-expired).
const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
const ns = `t-reap-paused-${Math.random().toString(36).slice(2, 10)}`;
const keys = createKeySpace(ns);
const store = new JobStore({ redis, keys });
const HOUR = 3600_000;
const DAY = 24 * HOUR;

const nats = await connectNats({ servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' });
const objects = new SnapshotStore(nats, ns);
const kept = pausedFilesStoreOf(objects, new PausedFilesQuota(redis, keys));

afterAll(async () => {
  await nats
    .jetstream()
    .views.os(`sandstream_snapshots_${ns.replace(/[^A-Za-z0-9_-]/g, '_')}`)
    .then((os) => os.destroy())
    .catch(() => {});
  await nats.close();
  await deleteNamespaceKeys(redis, ns);
  for (const id of await redis.keys(`job:{${ns}-*}`)) await redis.unlink(id);
  redis.disconnect();
});

/** A live sandbox paused `agoMs` ago, as the dispatcher leaves one. */
async function paused(name: string, agoMs: number, pausedRetentionSeconds?: number): Promise<string> {
  const id = `${ns}-${name}`;
  await store.create(
    parseLiveSandboxSpec({ id, image: 'x', ...(pausedRetentionSeconds ? { pausedRetentionSeconds } : {}) }),
  );
  for (const [from, to] of [
    ['queued', 'scheduled'],
    ['scheduled', 'starting'],
    ['starting', 'running'],
  ] as const)
    await store.transition(id, [from], to);
  await store.transition(id, ['running'], 'paused', { reason: 'pause', pausedAt: Date.now() - agoMs });
  return id;
}

function reaperOf(files?: { discard(kept: string): Promise<void> }) {
  return new Reaper({
    redis,
    keys,
    store,
    leases: new ExpiredLeases({ redis, keys }),
    dispatchKeys: new DispatchKeys(keys, 2),
    logger: silentLogger('reaper-paused-test'),
    retentionMs: DAY,
    paused: { maxRetentionMs: 30 * DAY, ...(files ? { files } : {}) },
    orphanGraceMs: 1000,
    sandboxGraceMs: 0,
    startingTimeoutMs: 10 * 60_000,
    heartbeatGraceMs: 5 * 60_000,
    jobIdGlob: `${ns}-*`,
    pauseMs: 0,
  });
}

const stateOf = async (id: string) => {
  const record = await store.get(id);
  return record ? sandboxRecordOf(record) : null;
};

describe('reaper: paused sandboxes', () => {
  it('closes a sandbox paused past its own retention or the cap, and keeps the others paused', async () => {
    const byDefault = await paused('default-8d', 8 * DAY); // default retention: 7 days
    const young = await paused('default-6d', 6 * DAY);
    const short = await paused('own-1h', 2 * HOUR, 3600);
    const capped = await paused('own-60d', 31 * DAY, 60 * 24 * 3600); // the cap below: 30 days
    const reaper = new Reaper({
      redis,
      keys,
      store,
      leases: new ExpiredLeases({ redis, keys }),
      dispatchKeys: new DispatchKeys(keys, 2),
      logger: silentLogger('reaper-paused-test'),
      retentionMs: DAY,
      paused: { maxRetentionMs: 30 * DAY },
      orphanGraceMs: 1000,
      sandboxGraceMs: 0,
      startingTimeoutMs: 10 * 60_000,
      heartbeatGraceMs: 5 * 60_000,
      jobIdGlob: `${ns}-*`,
      pauseMs: 0,
    });
    const report = await reaper.runOnce();
    expect(report.pausedExpired).toBe(3);
    for (const id of [byDefault, short, capped])
      expect(await stateOf(id)).toMatchObject({ state: 'closed', reason: 'paused-expired' });
    expect(await stateOf(young)).toMatchObject({ state: 'paused' });
    // Closed just now: kept for the usual retention, like any closed sandbox.
    expect((await reaper.runOnce()).jobsDeleted).toBe(0);
  });

  it('discards the kept files of a sandbox closed while paused or past its retention, from the snapshot store, before its record may go', async () => {
    const expired = await paused('files-expired', 8 * DAY);
    const closed = await paused('files-closed', HOUR);
    const ids: Record<string, string> = {};
    for (const id of [expired, closed]) {
      ids[id] = await kept.put(Readable.from([Buffer.from(`files of ${id}`)]), {
        sandboxId: id,
        tenant: 'default',
      });
      await store.setPausedFiles(id, ids[id] as string);
    }
    expect((await store.requestCancel(closed, 'user')).status).toBe('cancelled');
    const objectOf = (id: string) => JSON.parse(ids[id] as string).objectId as string;
    expect(await objects.names()).toEqual(expect.arrayContaining([objectOf(expired), objectOf(closed)]));

    // Without the store this reaper cannot discard them: they stay, and so do the references.
    expect((await reaperOf().runOnce()).pausedExpired).toBe(1);
    expect((await store.get(closed))?.pausedFiles).toBe(ids[closed]);

    const report = await reaperOf({ discard: (k) => kept.delete(k) }).runOnce();
    // Both: the expired one was closed by the first pass, its files kept until a pass could discard them.
    expect(report.pausedFilesDiscarded).toBe(2);
    for (const id of [expired, closed]) {
      expect((await store.get(id))?.pausedFiles).toBeUndefined();
      expect(await objects.names()).not.toContain(objectOf(id));
    }
    expect(await stateOf(expired)).toMatchObject({ state: 'closed', reason: 'paused-expired' });
  });

  it("the snapshots' orphan sweep leaves a paused sandbox's kept files, and takes a paused object nobody names after the grace", async () => {
    const owner = await paused('sweep', HOUR);
    const reference = await kept.put(Readable.from([Buffer.from('kept')]), {
      sandboxId: owner,
      tenant: 'default',
    });
    await store.setPausedFiles(owner, reference);
    // A keep cut short: stored, never written on a record.
    const stray = JSON.parse(
      await kept.put(Readable.from([Buffer.from('stray')]), { sandboxId: owner, tenant: 'default' }),
    ).objectId as string;
    const sweep = new SnapshotReaper({
      records: new SnapshotRecords(redis, keys),
      objects,
      uploadGraceMs: 0,
      isPausedObjectKept: (name) => pausedObjectKept(store, name),
      logger: silentLogger('reaper-paused-test'),
    });
    const keptName = JSON.parse(reference).objectId as string;
    await sweep.runOnce(); // first seen: within the grace
    expect(await objects.names()).toEqual(expect.arrayContaining([keptName, stray]));
    await sweep.runOnce();
    const names = await objects.names();
    expect(names).toContain(keptName);
    expect(names).not.toContain(stray);
  });
});
