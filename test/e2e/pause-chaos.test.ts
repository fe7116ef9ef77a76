import { createKeySpace, SnapshotRecords, SnapshotStore } from '@sandstream/bus';
import type { Sandbox } from '@sandstream/client';
import { NatsServer, pollUntil } from '@sandstream/test-support';
import { connect as connectNats, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// kill -9 of pod-lifecycle in the middle of a pause (its files being kept) and in the middle of
// a resume (its files being put back), issue 30 §5: nothing half-listed, nothing orphaned in the
// snapshot store (or counted in the tenant's quota) after the grace, and the sandbox ends paused
// or running with its files intact. In-process backend.
describe('kill -9 of pod-lifecycle mid-pause and mid-resume', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  let stack: Stack;
  beforeAll(async () => {
    nats = await NatsServer.start({ jetstream: true });
    nc = await connectNats({ servers: nats.url });
    stack = await startStack({
      label: 'pause-chaos',
      env: {
        NATS_URL: nats.url,
        LOG_ARCHIVE: 'off',
        // Longer than an upload takes here: the sweep takes chunks unreferenced past it for a dead upload's.
        SNAPSHOT_UPLOAD_GRACE_SECONDS: '45',
        REAPER_INTERVAL_SECONDS: '2',
      },
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    await nc?.close();
    await nats?.stop();
  }, 120_000);

  it('ends paused or running with its files intact, nothing listed or left over', async () => {
    const keys = createKeySpace(stack.namespace);
    const records = new SnapshotRecords(stack.redis, keys);
    const objects = new SnapshotStore(nc, stack.namespace);
    const frozen = () => stack.redis.hlen(keys.snapshots.frozen);
    const sandbox = await stack.client.sandboxes.create({ image: 'debian:bookworm-slim', tenant: 'chaos' });
    // Enough bytes that keeping and restoring them takes a while (~20 MB/s here).
    await sandbox.exec('head -c 120000000 /dev/urandom > big && sha256sum big > big.sum', {
      timeoutSeconds: 300,
    });
    const intact = async (s: Sandbox) => (await s.exec('sha256sum -c big.sum')).stdout;
    const state = async () => (await stack.client.sandboxes.get(sandbox.id))?.state;
    const settled = async (what: string) =>
      pollUntil(
        what,
        async () => {
          const now = await state();
          return now === 'paused' || now === 'ready' || now === 'failed' || now === 'closed'
            ? now
            : undefined;
        },
        { timeoutMs: 180_000, intervalMs: 1000 },
      );

    // Mid-pause: the capture holds the sandbox frozen while its files stream into the store.
    const pausing = sandbox.pause().catch((err: Error) => err);
    await pollUntil('files being kept', async () => (await frozen()) > 0, {
      timeoutMs: 60_000,
      intervalMs: 20,
    });
    await stack.crashAndRestart('pod-lifecycle');
    await pausing;
    expect(await settled('pause settled after the crash')).toBe('paused');

    // Mid-resume: the restore holds it frozen while the kept files are written back.
    const resuming = stack.client.sandboxes
      .resume(sandbox.id, { timeoutSeconds: 240 })
      .catch((err: Error) => err);
    await pollUntil('files being restored', async () => (await frozen()) > 0, {
      timeoutMs: 120_000,
      intervalMs: 20,
    }).catch(async (err: Error) => {
      const record = await stack.client.sandboxes.get(sandbox.id);
      throw new Error(`${err.message}; record ${JSON.stringify(record)}; logs ${stack.logs().slice(-6000)}`);
    });
    await stack.crashAndRestart('pod-lifecycle');
    await resuming;
    expect(await settled('resume settled after the crash')).toBe('ready');
    const back = await stack.client.sandboxes.connect(sandbox.id);
    expect(await intact(back)).toBe('big: OK\n');

    // Nothing half-listed; once the grace passed no paused object is left, nor counted.
    expect(await records.list()).toEqual([]);
    await pollUntil(
      'no paused files left in the store',
      async () => (await objects.names()).filter((n) => n.startsWith('pause-')).length === 0,
      { timeoutMs: 120_000, intervalMs: 1000 },
    );
    await pollUntil(
      'no paused bytes counted',
      async () => Number((await stack.redis.hget(keys.snapshots.usage('chaos'), 'pausedBytes')) ?? 0) === 0,
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    await back.close();
  }, 600_000);
});
