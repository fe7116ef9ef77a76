import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKeySpace, SnapshotRecords } from '@sandstream/bus';
import { NatsServer, pollUntil } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// kill -9 of pod-lifecycle in the middle of a capture (issue 30 §5): no half snapshot is ever
// listed, the sandbox it froze runs again once the freeze lease lapses (any replica's sweep), and
// the reaper deletes the dead upload's record after its grace. In-process backend.
describe('kill -9 of pod-lifecycle mid-snapshot', () => {
  let nats: NatsServer;
  let stack: Stack;
  let cacheRoot: string;
  beforeAll(async () => {
    nats = await NatsServer.start({ jetstream: true });
    // The killed replica's half-written spool (capture-cache.ts) stays in its own directory, removed here.
    cacheRoot = await mkdtemp(join(tmpdir(), 'snap-chaos-cache-'));
    stack = await startStack({
      label: 'snap-chaos',
      env: {
        NATS_URL: nats.url,
        LOG_ARCHIVE: 'off',
        SNAPSHOT_UPLOAD_GRACE_SECONDS: '10',
        REAPER_INTERVAL_SECONDS: '2',
        SNAPSHOT_CACHE_DIR: cacheRoot,
      },
    });
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
    await nats?.stop();
    if (cacheRoot) await rm(cacheRoot, { recursive: true, force: true });
  }, 120_000);

  it('leaves nothing listed, thaws the sandbox, and the reaper clears the upload', async () => {
    const sandbox = await stack.client.sandboxes.create({ image: 'debian:bookworm-slim' });
    // Enough bytes that the capture takes a while (~20 MB/s here), and a ticker to see a freeze.
    await sandbox.exec('head -c 300000000 /dev/urandom > big && mkdir -p t', { timeoutSeconds: 300 });
    await sandbox.processes.start(['sh', '-c', 'while true; do date +%s%N > t/tick; sleep 0.2; done']);
    const records = new SnapshotRecords(stack.redis, createKeySpace(stack.namespace));
    const owners = createKeySpace(stack.namespace).snapshots.owners;

    const taking = sandbox.snapshot({ timeoutSeconds: 120 }).then(
      () => 'taken',
      (err: Error) => err.message,
    );
    // The upload has begun (its record exists, `uploading`): now the process taking it dies.
    await pollUntil('upload begun', async () => (await stack.redis.hlen(owners)) > 0, { timeoutMs: 60_000 });
    const [snapshotId] = await stack.redis.hkeys(owners);
    await stack.crashAndRestart('pod-lifecycle');
    expect(await records.list()).toEqual([]);
    expect(await records.get(snapshotId as string)).toBeNull();

    // Thawed by the new replica's sweep once the dead one's lease (30 s) lapsed.
    const tickNow = async () => (await sandbox.exec('cat t/tick')).stdout;
    await pollUntil(
      'ticker running again',
      async () => {
        const a = await tickNow();
        await new Promise((r) => setTimeout(r, 600));
        return (await tickNow()) !== a;
      },
      { timeoutMs: 90_000, intervalMs: 1000 },
    );
    // The dead upload's record goes after its grace (10 s here); nothing was ever listed.
    await pollUntil('dead upload reaped', async () => (await records.read(snapshotId as string)) === null, {
      timeoutMs: 90_000,
      intervalMs: 1000,
    });
    expect(await records.list()).toEqual([]);
    const outcome = await taking;
    expect(outcome).not.toBe('taken');
    await sandbox.close();
  }, 300_000);
});
