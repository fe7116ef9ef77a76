import { randomBytes } from 'node:crypto';
import { createKeySpace } from '@sandstream/bus';
import { DockerBackend } from '@sandstream/sandbox';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, dockerEngine, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';

// A pod-lifecycle killed while it held a sandbox frozen for a capture: the sandbox is listed as
// frozen and its lease lapses; the sweep of any replica thaws it. Docker, a plain paused container.
const { docker, skip } = await dockerEngine('snapshot freeze guard');
const redis = new Redis(testRedisUrl());
const namespace = uniqueNamespace('freeze');
const keys = createKeySpace(namespace);

afterAll(async () => {
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
});

describe.skipIf(skip)('SnapshotFreezeGuard', () => {
  it('thaws a sandbox whose capture died with it, and leaves one whose capture still runs', async () => {
    const container = await docker.createContainer({
      name: `sandstream-freeze-${randomBytes(4).toString('hex')}`,
      Image: 'sandstream/debian:bookworm',
      Entrypoint: ['sleep', 'infinity'],
    });
    try {
      await container.start();
      const backend = new DockerBackend({ docker, redis });
      const guard = new SnapshotFreezeGuard({ redis, keys, backend, logger: silentLogger('freeze') });
      const ref = { jobId: 'frozen-1', backend: 'docker' as const, id: container.id };

      // Held: the sweep must not thaw a capture under way, and a second capture is refused.
      await guard.hold('frozen-1', ref, async () => {
        await container.pause();
        expect(await guard.sweep()).toBe(0);
        await expect(guard.hold('frozen-1', ref, async () => 1)).rejects.toThrow(/under way/);
      });
      expect((await container.inspect()).State.Paused).toBe(true);

      // What a kill -9 leaves: listed as frozen, no lease.
      await redis.hset(keys.snapshots.frozen, 'frozen-1', JSON.stringify(ref));
      expect(await guard.sweep()).toBe(1);
      expect((await container.inspect()).State.Paused).toBe(false);
      expect(await redis.hlen(keys.snapshots.frozen)).toBe(0);
    } finally {
      await container.remove({ force: true });
    }
  }, 60_000);
});
