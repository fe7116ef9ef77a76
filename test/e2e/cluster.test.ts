import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type RedisCluster, startRedisCluster } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { runSmoke } from './smoke.js';

// The smoke tour on a Redis Cluster of three masters started here from plain redis-server:
// services, SDK and agents all on the cluster (the agent via the master of its job's slot).
describe('pipeline smoke on a 3-master Redis Cluster', () => {
  let cluster: RedisCluster;
  let stack: Stack;
  beforeAll(async () => {
    cluster = await startRedisCluster(3);
    const client = await cluster.connect();
    const first = cluster.servers[0];
    stack = await startStack({
      label: 'clu',
      redis: () => client,
      env: {
        REDIS_URL: first?.url ?? '',
        REDIS_CLUSTER_NODES: cluster.seeds,
        // 16 shards: every master holds several, so every agent has one on its own node.
        COMPLETION_SHARDS: '16',
        // Per-sandbox ACL users would have to be created on every node; not covered here.
        SANDBOX_ACL: 'off',
      },
    });
  });
  afterAll(async () => {
    await stack?.stop();
    await cluster?.stop();
  });

  it('runs all step kinds, a failing step and a cancel', async () => {
    await runSmoke(stack, 'none');
  }, 240_000);

  it('moves a tree in and out of a live sandbox through the master of its transfer list', async () => {
    await using sandbox = await stack.client.sandboxes.create({
      id: `${stack.namespace}-xfer`,
      image: 'any',
    });
    const local = mkdtempSync(join(tmpdir(), 'sandstream-cluster-xfer-'));
    try {
      mkdirSync(join(local, 'tree'));
      const blob = randomBytes(3 * 1024 * 1024 + 5); // several chunks
      writeFileSync(join(local, 'tree', 'blob.bin'), blob);
      expect(await sandbox.files.upload(join(local, 'tree'), 'in')).toMatchObject({ files: 1 });
      await sandbox.files.downloadTo('in/tree', join(local, 'back'));
      expect(readFileSync(join(local, 'back', 'tree', 'blob.bin')).equals(blob)).toBe(true);
    } finally {
      rmSync(local, { recursive: true, force: true });
    }
  }, 60_000);
});
