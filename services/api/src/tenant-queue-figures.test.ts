import { bullJobId, createKeySpace, scopedJobId } from '@sandstream/bus';
import { connectTestRedis, deleteNamespaceKeys, uniqueNamespace } from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { allFigures, TenantQueueFigures } from './tenant-queue-figures.js';

// Per-tenant queue figures counted in Redis, slice by slice, against BullMQ's own totals.
const redis = connectTestRedis();
const namespace = uniqueNamespace('tenant-figures');
const queue = new Queue('jobs', {
  connection: redis.duplicate(),
  prefix: createKeySpace(namespace).bullPrefix,
});

afterAll(async () => {
  await queue.close();
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
});

describe('TenantQueueFigures', () => {
  it("counts each tenant's entries in every state, past one slice, and tenant default's plain ids", async () => {
    const k = queue.keys;
    const fill = redis.pipeline();
    // More than one slice (1,000) in a state: acme 1,500 completed, globex 700, default 300.
    const owners = [...Array(1500).fill('acme'), ...Array(700).fill('globex'), ...Array(300).fill('default')];
    owners.forEach((tenant, i) => {
      fill.zadd(k.completed as string, i, bullJobId(scopedJobId(tenant, `job:${i}`)));
    });
    for (let i = 0; i < 3; i++) fill.rpush(k.wait as string, bullJobId(scopedJobId('acme', `w${i}`)));
    fill.rpush(k.paused as string, bullJobId(scopedJobId('globex', 'p')));
    fill.zadd(k.failed as string, 1, bullJobId(scopedJobId('default', 'plain')));
    await fill.exec();

    const figures = new TenantQueueFigures(redis, [queue]);
    const [acme] = await figures.of('acme');
    expect(acme).toEqual({
      name: 'jobs',
      waiting: 3,
      active: 0,
      delayed: 0,
      prioritized: 0,
      completed: 1500,
      failed: 0,
    });
    const [globex] = await figures.of('globex');
    expect(globex).toMatchObject({ waiting: 1, completed: 700, failed: 0 });
    const [plain] = await figures.of('default');
    expect(plain).toMatchObject({ waiting: 0, completed: 300, failed: 1 });
    const [nobody] = await figures.of('initech');
    expect(nobody).toMatchObject({ waiting: 0, completed: 0 });
    // Together they are BullMQ's own total.
    const all = await allFigures(queue);
    expect(all.completed).toBe((acme?.completed ?? 0) + (globex?.completed ?? 0) + (plain?.completed ?? 0));
  });
});
