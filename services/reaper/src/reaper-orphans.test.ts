import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKeySpace, DispatchKeys, ExpiredLeases, JobStore } from '@sandstream/bus';
import { InProcessBackend, SandboxLabels, SandboxSpecSchema } from '@sandstream/sandbox';
import { silentLogger } from '@sandstream/telemetry';
import { type RedisServer, startRedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Reaper } from './reaper.js';

// Sandboxes whose jobs vanished because Redis came back empty: a private redis-server, flushed.
describe('reaper: orphaned sandboxes after Redis lost its data', () => {
  let own: RedisServer;
  let redis: Redis;
  const root = mkdtempSync(join(tmpdir(), 'sandstream-orphans-'));
  beforeAll(async () => {
    own = await startRedisServer();
    redis = new Redis(own.url, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    redis?.disconnect();
    await own?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it("destroys only this installation's, after the grace, with their processes and directories", async () => {
    const backend = new InProcessBackend({ redis, root });
    const sandbox = (jobId: string, labels: Record<string, string>) =>
      backend.create({
        jobId,
        tenant: 'acme',
        spec: SandboxSpecSchema.parse({ image: 'x', command: ['sleep', '60'], labels }),
        agent: { redisUrl: own.url, keyStyle: 'tagged' },
      });
    await sandbox('mine', { [SandboxLabels.installation]: 'here' });
    await sandbox('theirs', { [SandboxLabels.installation]: 'elsewhere' });
    await sandbox('unlabelled', {});
    const stateDirOf = async (jobId: string) =>
      JSON.parse((await redis.hget('sandstream:inprocess:sandboxes', jobId)) ?? '{}').stateDir as string;
    const mineDir = await stateDirOf('mine');
    expect(existsSync(mineDir)).toBe(true);
    // Redis restarted empty: no job records, no in-process registry.
    await redis.flushall();

    let offset = 0;
    const keys = createKeySpace('orphans');
    const reaper = new Reaper({
      redis,
      keys,
      store: new JobStore({ redis, keys }),
      leases: new ExpiredLeases({ redis, keys }),
      dispatchKeys: new DispatchKeys(keys, 1),
      logger: silentLogger('reaper-orphans'),
      backend,
      installation: 'here',
      retentionMs: 60_000,
      orphanGraceMs: 60_000,
      sandboxGraceMs: 30_000,
      startingTimeoutMs: 60_000,
      heartbeatGraceMs: 60_000,
      now: () => Date.now() + offset,
    });
    try {
      // First sight of a missing job starts its grace: nothing goes yet.
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(0);
      offset += 31_000;
      expect((await reaper.runOnce()).sandboxesDestroyed).toBe(1);
      const left = await backend.list();
      expect(left.map((s) => s.jobId).sort()).toEqual(['theirs', 'unlabelled']);
      expect(left.every((s) => s.state === 'running')).toBe(true);
      expect(existsSync(mineDir)).toBe(false);
    } finally {
      for (const jobId of ['mine', 'theirs', 'unlabelled'])
        await backend.destroy({ jobId, backend: 'inprocess', id: '0' }, { graceMs: 0 });
    }
    expect(await backend.list()).toEqual([]);
  });
});
