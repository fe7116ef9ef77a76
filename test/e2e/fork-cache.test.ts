import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SnapshotRecords, SnapshotStore } from '@sandstream/bus';
import type { Sandbox } from '@sandstream/client';
import { liveBackends, NatsServer, pollUntil } from '@sandstream/test-support';
import { connect as connectNats, type NatsConnection } from 'nats';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 30 §7, fork → first exec: pod-lifecycle keeps its captures on local disk
// (capture-cache.ts) and a sandbox created from one on the same replica restores from there; a
// fork's sandboxes are created while the capture runs. The cache is bounded, checked by hash
// (a damaged entry falls back to the store) and removed at shutdown. A fork's snapshot is
// temporary: fork() answers once the forks run, before its upload, and pod-lifecycle drops it
// (record, stored bytes, local copy) afterwards; after a kill -9 the reaper collects it.

const CACHE_MAX_BYTES = 5 * 1024 * 1024;
/** Short, so the reaper collects what a killed pod-lifecycle left within the test. */
const UPLOAD_GRACE_SECONDS = 20;

for (const backend of liveBackends()) {
  describe(`fork through the capture cache on ${backend.name}`, () => {
    let nats: NatsServer;
    let nc: NatsConnection;
    let stack: Stack;
    let cacheRoot: string;
    const open: Sandbox[] = [];

    beforeAll(async () => {
      nats = await NatsServer.start({ jetstream: true });
      nc = await connectNats({ servers: nats.url });
      cacheRoot = await mkdtemp(join(tmpdir(), 'fork-cache-e2e-'));
      stack = await startStack({
        label: `forkc-${backend.name}`,
        env: {
          ...backend.env,
          NATS_URL: nats.url,
          LOG_ARCHIVE: 'off',
          SNAPSHOT_UPLOAD_GRACE_SECONDS: String(UPLOAD_GRACE_SECONDS),
          REAPER_INTERVAL_SECONDS: '1',
          SNAPSHOT_CACHE_DIR: cacheRoot,
          SNAPSHOT_CACHE_MAX_BYTES: String(CACHE_MAX_BYTES),
        },
      });
    }, 180_000);

    // Each case closes what it opened: the tenant holds 10 slots (SCHEDULER_TENANT_SLOTS), and the
    // sandboxes earlier cases left open made a later create wait for a slot forever.
    afterEach(async () => {
      nats?.unfreeze();
      await Promise.all(open.splice(0).map((s) => s.close().catch(() => {})));
    }, 120_000);

    afterAll(async () => {
      nats?.unfreeze();
      await Promise.all(open.map((s) => s.close().catch(() => {})));
      await stack?.stop();
      await nc?.close();
      await nats?.stop();
      await rm(cacheRoot, { recursive: true, force: true });
    }, 180_000);

    const create = async (extra: Record<string, unknown> = {}) => {
      const sandbox = await stack.client.sandboxes.create({ image: backend.image, ...extra });
      open.push(sandbox);
      return sandbox;
    };
    const sh = async (sandbox: Sandbox, command: string) => (await sandbox.exec(command)).stdout;
    /** The captures the replica holds: files in its own directory below the cache root. */
    const cached = async () => {
      const dirs = (await readdir(cacheRoot)).filter((n) => n.startsWith('sandstream-captures-'));
      expect(dirs).toHaveLength(1);
      const dir = join(cacheRoot, dirs[0] as string);
      return { dir, files: await readdir(dir) };
    };
    const store = () => new SnapshotStore(nc, stack.namespace);
    const records = () => new SnapshotRecords(stack.redis, stack.client.keys);
    /** The fork's snapshot, as its spec names it. */
    const snapshotOf = async (fork: Sandbox) =>
      (await stack.client.sandboxes.get(fork.id))?.spec.fromSnapshot as string;
    /** Nothing of the snapshot left: no record (of any state), no stored object, no chunk no object names. */
    const goneEverywhere = async (snapshotId: string) =>
      (await records().read(snapshotId)) === null &&
      !(await store().names()).includes(snapshotId) &&
      (await store().unreferencedChunks()).length === 0;
    /** The plain copies and spools this replica holds. */
    const localCaptures = async () => {
      const dirs = (await readdir(cacheRoot)).filter(
        (n) => n.startsWith('sandstream-copies-') || n.startsWith('sandstream-captures-'),
      );
      return (await Promise.all(dirs.map((n) => readdir(join(cacheRoot, n)).catch(() => [])))).flat();
    };

    it('forks hold the source files at their first command, restored from the local capture', async () => {
      const source = await create();
      await sh(source, 'mkdir -p d && echo forked > d/f.txt && head -c 300000 /dev/urandom > d/r.bin');
      const sum = await sh(source, 'sha256sum d/r.bin');
      const forks = await source.fork({ count: 3 });
      open.push(...forks);
      for (const fork of forks) {
        expect(await sh(fork, 'cat d/f.txt')).toBe('forked\n');
        expect(await sh(fork, 'sha256sum d/r.bin')).toBe(sum);
      }
      // Every fork read the capture here (a plain copy, or the spool as it was written, or whole).
      const opened =
        stack.logs().match(/"from":"(copy|spool|cache|store)"[^\n]*"msg":"snapshot opened for a start"/g) ??
        [];
      // At least one open per fork (a start the engine failed under load is retried, and opens again).
      expect(opened.length).toBeGreaterThanOrEqual(3);
      // None from the store, but where a restore from a plain copy failed (the engine failed to
      // pause the fork under load) and the stored snapshot finished it, as it must.
      const fellBack = stack.logs().match(/restored from its bytes instead/g) ?? [];
      expect(opened.filter((line) => line.includes('"from":"store"'))).toHaveLength(fellBack.length);
    }, 240_000);

    it('fork() answers once its forks run, before its snapshot is stored; pod-lifecycle then drops the snapshot, the SDK doing nothing', async () => {
      const source = await create();
      await sh(source, 'echo early > e.txt && head -c 300000 /dev/urandom > r.bin');
      const sum = await sh(source, 'sha256sum r.bin');
      // The store stalls: no upload can finish (nor commit) until it answers again.
      nats.freeze();
      let forks: Sandbox[];
      let snapshotId: string;
      try {
        forks = await source.fork({ count: 2 });
        open.push(...forks);
        snapshotId = await snapshotOf(forks[0] as Sandbox);
        expect((await records().read(snapshotId))?.state).toBe('uploading');
        for (const fork of forks) {
          expect(await sh(fork, 'cat e.txt')).toBe('early\n');
          expect(await sh(fork, 'sha256sum r.bin')).toBe(sum);
        }
      } finally {
        nats.unfreeze();
      }
      // Stored, committed (never listed), then dropped by pod-lifecycle: record, bytes, local copy.
      // Its log line comes once all three went (record and bytes go before the local copy, so a
      // poll on them alone raced the rest).
      const dropped = new RegExp(`"snapshotId":"${snapshotId}"[^\n]*"msg":"a fork's snapshot dropped"`);
      await pollUntil(`fork snapshot ${snapshotId} dropped`, async () => dropped.test(stack.logs()), {
        timeoutMs: 120_000,
        intervalMs: 200,
      });
      expect(await goneEverywhere(snapshotId)).toBe(true);
      expect((await localCaptures()).some((f) => f.startsWith(snapshotId))).toBe(false);
      expect(await stack.client.snapshots.list()).toEqual([]);
      // The forks keep their files: they never needed the snapshot after their start.
      for (const fork of forks) expect(await sh(fork, 'cat e.txt')).toBe('early\n');
    }, 240_000);

    it('a fork restored on the capturing node holds the same files, modes, times and symlinks as its source', async () => {
      const source = await create();
      await sh(
        source,
        [
          'mkdir -p t/sub/deep t/empty && head -c 400000 /dev/urandom > t/sub/r.bin',
          'printf "#!/bin/sh\\necho hi\\n" > t/sub/deep/run.sh && chmod 750 t/sub/deep/run.sh',
          'echo s > t/secret && chmod 600 t/secret && chmod 710 t/sub',
          'ln -s sub/r.bin t/link && ln -s /nowhere t/dangling && touch -d 2020-01-02T03:04:05 t/sub/r.bin',
        ].join(' && '),
      );
      // Type, mode, size, modification time (to the second: the snapshot keeps ms), target, content hash.
      const listing =
        "cd t && find . -printf '%y %m %s %Ts %p -> %l\\n' | sort && find . -type f -exec sha256sum {} + | sort";
      const expected = await sh(source, listing);
      // On Docker the container's own layer too: a file added outside the work volume, one deleted.
      const layer = 'echo layer > /opt/added.txt && rm /etc/issue';
      if (backend.name === 'docker') await sh(source, layer);
      const [fork] = await source.fork({ count: 1 });
      open.push(fork as Sandbox);
      expect(await sh(fork as Sandbox, listing)).toBe(expected);
      if (backend.name === 'docker')
        expect(await sh(fork as Sandbox, 'cat /opt/added.txt; test -e /etc/issue || echo gone')).toBe(
          'layer\ngone\n',
        );
      // Both backends copy trees: the fork restored from the plain copy, not the stream.
      const logs = stack.logs();
      expect(logs).toMatch(/"from":"copy"[^\n]*"msg":"snapshot opened for a start"/);
      expect(logs).not.toContain('was not copied for forks here');
    }, 240_000);

    it('a snapshot held in the cache restores without the store; a damaged entry falls back to the store', async () => {
      const source = await create();
      await sh(source, 'echo from-cache > c.txt');
      const taken = await source.snapshot();
      // Its stored bytes gone (the record stays): only the local capture can start a sandbox.
      await store().delete(taken.snapshotId);
      const copy = await create({ fromSnapshot: taken.snapshotId });
      expect(await sh(copy, 'cat c.txt')).toBe('from-cache\n');

      await sh(source, 'echo from-store > c.txt');
      const second = await source.snapshot();
      const { dir, files } = await cached();
      const entry = files.find((f) => f.startsWith(`${second.snapshotId}.`));
      expect(entry).toBeDefined();
      await writeFile(join(dir, entry as string), 'not the capture');
      const fallback = await create({ fromSnapshot: second.snapshotId });
      expect(await sh(fallback, 'cat c.txt')).toBe('from-store\n');
      expect(stack.logs()).toContain(`the cached capture of ${second.snapshotId} holds`);
      // The damaged file is gone from the cache.
      expect((await cached()).files.some((f) => f.startsWith(`${second.snapshotId}.`))).toBe(false);
    }, 240_000);

    it('holds at most its byte bound and is removed at shutdown', async () => {
      const source = await create();
      // Three captures of ~2 MB (random, so gzip does not shrink them) against a 5 MB bound.
      for (let i = 0; i < 3; i++) {
        await sh(source, `head -c 2000000 /dev/urandom > big.bin`);
        await source.snapshot();
      }
      const { files } = await cached();
      expect(files.length).toBeGreaterThan(0);
      expect(files.length).toBeLessThanOrEqual(2);
      await Promise.all(open.splice(0).map((s) => s.close().catch(() => {})));
      await stack.stopServices();
      expect((await readdir(cacheRoot)).filter((n) => n.startsWith('sandstream-'))).toEqual([]);
      await stack.startServices();
    }, 240_000);

    // Last: the killed replica's cache directories stay until their age bound (the other tests count them).
    it('a kill -9 of pod-lifecycle while a fork snapshot uploads leaves no record, object or chunk once the reaper collected', async () => {
      const source = await create();
      await sh(source, 'head -c 300000 /dev/urandom > r.bin');
      nats.freeze();
      let snapshotId: string;
      try {
        const forks = await source.fork({ count: 1 });
        open.push(...forks);
        snapshotId = await snapshotOf(forks[0] as Sandbox);
        expect((await records().read(snapshotId))?.state).toBe('uploading');
        // Its capture is mid-upload: killed there, the upload and the drop never finish.
        await stack.services.get('pod-lifecycle')?.[0]?.kill9();
      } finally {
        nats.unfreeze();
      }
      // A fresh replica (it connects to NATS as it starts): the killed one's leftovers are not its own.
      await stack.crashAndRestart('pod-lifecycle');
      await pollUntil(`fork snapshot ${snapshotId} collected`, () => goneEverywhere(snapshotId), {
        timeoutMs: (UPLOAD_GRACE_SECONDS * 4 + 60) * 1000,
        intervalMs: 500,
      });
    }, 300_000);
  });
}
