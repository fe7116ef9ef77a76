import { RedisCluster } from '@sandstream/test-support';
import { Queue, Worker } from 'bullmq';
import type { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJobSpec } from './job-spec.js';
import { decodeJobEventFields } from './job-state.js';
import { JobStore } from './job-store.js';
import { submitParsedJob } from './job-submit.js';
import { createKeySpace } from './key-space.js';
import { QueueNames } from './queues.js';
import { createRedis } from './redis-connection.js';
import { SandboxAcl } from './sandbox-acl.js';
import { freeSandboxKeys } from './sandbox-key-cleanup.js';
import { sandboxRedisUsage } from './sandbox-redis-usage.js';
import { scanKeys } from './scan-keys.js';
import { SlotAdmission } from './slot-leases.js';

let cluster: RedisCluster;
let redis: Cluster;
const keys = createKeySpace('sandstream');

beforeAll(async () => {
  cluster = await RedisCluster.start();
  redis = createRedis({ role: 'worker', clusterNodes: cluster.nodes }) as Cluster;
});

afterAll(async () => {
  redis?.disconnect();
  await cluster?.stop();
});

describe('on a real Redis Cluster', () => {
  it('creates, transitions, lists and deletes jobs (no cross-slot command anywhere)', async () => {
    const store = new JobStore({ redis, keys });
    const ids = Array.from({ length: 20 }, (_, i) => `cluster-job-${i}`);
    for (const id of ids)
      await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    // The jobs really are spread over the masters (else this test would prove nothing).
    const sizes = await Promise.all(redis.nodes('master').map((node) => node.dbsize()));
    expect(sizes.filter((n) => n > 0).length).toBeGreaterThan(1);
    for (const id of ids.slice(0, 10)) {
      expect((await store.transition(id, ['queued'], 'scheduled')).status).toBe('ok');
    }
    expect(await store.requestCancel(ids[15]!, 'stop')).toEqual({ status: 'cancelled' });
    expect((await store.list({ state: 'scheduled' })).map((j) => j.id).sort()).toEqual(
      ids.slice(0, 10).sort(),
    );
    expect((await store.list({ tenant: 'acme', limit: 100 })).length).toBe(20);
    const events = await redis.xrange(keys.sandbox(ids[0]!).events, '-', '+');
    expect(events.map(([, f]) => decodeJobEventFields(f)?.to)).toEqual(['queued', 'scheduled']);
    expect(await redis.xlen(keys.lifecycleStream)).toBe(20 + 10 + 2);
    await store.delete(ids[0]!, 'acme');
    expect(await store.get(ids[0]!)).toBeNull();
  });

  it('admits with leases and moves jobs through BullMQ queues with the hash-tag prefix', async () => {
    const leases = new SlotAdmission({ redis, keys, globalLimit: 2, tenantLimit: 2, leaseMs: 60_000 });
    const results = await Promise.all(['a', 'b', 'c'].map((h) => leases.acquire(h, 'acme')));
    expect(results.filter((r) => r.granted)).toHaveLength(2);
    expect(await leases.release('a', 'acme')).toBe(true);

    const store = new JobStore({ redis, keys });
    const jobs = new Queue(QueueNames.jobs, { connection: redis, prefix: keys.bullPrefix });
    const seen: string[] = [];
    const worker = new Worker(
      QueueNames.jobs,
      async (job) => {
        seen.push(job.data.jobId);
      },
      { connection: redis.duplicate(), prefix: keys.bullPrefix },
    );
    await submitParsedJob(
      store,
      jobs,
      parseJobSpec({ id: 'cluster-q-1', image: 'x', steps: [{ command: 'true' }] }),
    );
    await submitParsedJob(
      store,
      jobs,
      parseJobSpec({ id: 'cluster-q-1', image: 'x', steps: [{ command: 'true' }] }),
    );
    const until = Date.now() + 10_000;
    while (seen.length < 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    // A job added after both submits, at the least urgent priority, is processed after them: once
    // it is seen, a second copy of cluster-q-1 would have been seen too.
    await jobs.add('marker', { jobId: 'cluster-q-marker' }, { priority: 100 });
    while (!seen.includes('cluster-q-marker') && Date.now() < until + 10_000)
      await new Promise((r) => setTimeout(r, 20));
    expect(seen.filter((id) => id !== 'cluster-q-marker')).toEqual(['cluster-q-1']);
    await worker.close();
    await jobs.close();
  });

  it('scans every master and creates sandbox users on every node', async () => {
    const found: string[] = [];
    for await (const batch of scanKeys(redis, { match: 'job:{cluster-job-*}', count: 5 }))
      found.push(...batch);
    expect(new Set(found).size).toBe(19);

    const acl = new SandboxAcl(redis, keys);
    await acl.create('cluster-sbx', keys.completionStream(0));
    for (const node of redis.nodes('all')) {
      expect(await node.call('ACL', 'USERS')).toContain(acl.username('cluster-sbx'));
    }
    await acl.delete('cluster-sbx');
    for (const node of redis.nodes('all')) {
      expect(await node.call('ACL', 'USERS')).not.toContain(acl.username('cluster-sbx'));
    }
  });

  it("measures and frees sandboxes' keys over every master (database 0 only: a Cluster has no other)", async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `cluster-sbx-${i}`);
    for (const id of ids) {
      await redis.set(`${keys.sandboxPrefix(id)}a`, 'x'.repeat(1000));
      await redis.lpush(`${keys.sandboxPrefix(id)}b`, 'y');
    }
    const usage = await sandboxRedisUsage(redis, new Set(ids));
    expect([...usage.keys()].sort()).toEqual([...ids].sort());
    expect(usage.get('cluster-sbx-0')?.keys.map((k) => k.db)).toEqual([0, 0]);
    expect(usage.get('cluster-sbx-0')?.bytes).toBeGreaterThan(1000);

    for (const id of ids) {
      expect(await freeSandboxKeys(redis, keys, id, { keep: [`${keys.sandboxPrefix(id)}b`] })).toBe(1);
    }
    const left: string[] = [];
    for await (const batch of scanKeys(redis, { match: 'sandbox:{cluster-sbx-*}:*' })) left.push(...batch);
    expect(left.sort()).toEqual(ids.map((id) => `${keys.sandboxPrefix(id)}b`).sort());
    for (const id of ids) await freeSandboxKeys(redis, keys, id);
  });
});
