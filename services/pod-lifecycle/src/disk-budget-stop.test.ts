import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bullJobId, createKeySpace, JobStore, parseJobSpec, QueueNames } from '@sandstream/bus';
import { InProcessBackend, SandboxLabels, SandboxSpecSchema } from '@sandstream/sandbox';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createDiskBudgetStop } from './disk-budget-stop.js';

// Issue 28, item 1, as pod-lifecycle runs it: a sandbox past its disk limit ends its job `failed`
// with reason `disk-budget: …`, its use is on the record for stats(), and a destroy is queued.
const url = testRedisUrl();
const redis = new Redis(url, { maxRetriesPerRequest: null });
const ns = `t-disk-${randomBytes(4).toString('hex')}`;
const keys = createKeySpace(ns);
const store = new JobStore({ redis, keys });
const root = join(tmpdir(), `sandstream-disk-stop-${randomBytes(4).toString('hex')}`);
const backend = new InProcessBackend({ redis, root, registryKey: `${ns}:inprocess` });
const destroyQueue = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix: keys.bullPrefix });
const jobId = `${ns}-filler`;

afterAll(async () => {
  await backend.destroy({ jobId, backend: 'inprocess', id: '0' }, { graceMs: 0 }).catch(() => {});
  await destroyQueue.close();
  await store.delete(jobId, 'acme').catch(() => {});
  await deleteNamespaceKeys(redis, ns);
  await rm(root, { recursive: true, force: true });
  redis.disconnect();
});

describe('disk budget stop (pod-lifecycle)', () => {
  it('fails the job with reason disk-budget, records its disk use and queues its destroy', async () => {
    await store.create(parseJobSpec({ id: jobId, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    await store.transition(jobId, ['queued'], 'scheduled');
    await store.transition(jobId, ['scheduled'], 'starting');
    await backend.create({
      jobId,
      tenant: 'acme',
      spec: SandboxSpecSchema.parse({
        image: 'ignored',
        labels: { [SandboxLabels.installation]: ns, [SandboxLabels.installationId]: `r-${ns}` },
        command: [
          'sh',
          '-c',
          'i=0; while true; do dd if=/dev/zero of=f-$i bs=1M count=4 2>/dev/null; i=$((i+1)); sleep 0.1; done',
        ],
        resources: { limits: { ephemeralStorage: '32Mi' } },
      }),
      agent: { redisUrl: url, keyStyle: 'tagged' },
    });
    await store.transition(jobId, ['starting'], 'running');
    const watch = createDiskBudgetStop({
      backend,
      store,
      destroyQueue,
      installation: ns,
      installationId: () => `r-${ns}`,
      intervalMs: 1000,
      logger: silentLogger('disk-test'),
    });
    watch.start();
    try {
      await expect.poll(async () => (await store.get(jobId))?.state, { timeout: 30_000 }).toBe('failed');
    } finally {
      await watch.stop();
    }
    const record = await store.get(jobId);
    expect(record?.reason).toMatch(/^disk-budget: the sandbox wrote .* over its limit of 32 MB/);
    expect(record?.disk?.limitBytes).toBe(32 * 1024 ** 2);
    expect(record?.disk?.usedBytes).toBeGreaterThan(32 * 1024 ** 2);
    const queued = await destroyQueue.getJob(bullJobId(jobId));
    expect(queued?.data).toMatchObject({ jobId, outcome: 'failed' });
    expect(queued?.data.reason).toMatch(/^disk-budget: /);
  }, 60_000);
});
