import { fileURLToPath } from 'node:url';
import { createKeySpace, JobStore, parseJobSpec, QueueNames, submitParsedJob } from '@sandstream/bus';
import { deleteNamespaceKeys, ServiceProcess, testRedisUrl } from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

// The built service, as production runs it (npx tsc -b services/scheduler).
const entry = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const url = testRedisUrl();
const ns = `t-schedmain-${Math.random().toString(36).slice(2, 10)}`;
const keys = createKeySpace(ns);
const redis = new Redis(url, { maxRetriesPerRequest: null });
const store = new JobStore({ redis, keys });
const procs: ServiceProcess[] = [];
const ids: string[] = [];

afterAll(async () => {
  for (const p of procs) await p.stop();
  for (const name of [QueueNames.jobs, QueueNames.sandboxCreate]) {
    const q = new Queue(name, { connection: redis, prefix: keys.bullPrefix });
    await q.obliterate({ force: true });
    await q.close();
  }
  for (const id of ids) await store.delete(id, 'acme');
  await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

const start = (env: Record<string, string> = {}) => {
  const p = new ServiceProcess(entry, { REDIS_URL: url, SANDSTREAM_NAMESPACE: ns, HEALTH_PORT: '0', ...env });
  procs.push(p);
  return p;
};

describe('scheduler process', () => {
  it('refuses bad configuration naming each variable and its rule', async () => {
    const p = start({ SCHEDULER_GLOBAL_SLOTS: '0', REDIS_URL: 'http://nope' });
    expect(await p.exitCode()).toBe(1);
    const fatal = await p.waitForLog((l) => l.level === 'fatal');
    expect(fatal.err).toContain('SCHEDULER_GLOBAL_SLOTS: must be at least 1');
    expect(fatal.err).toContain('REDIS_URL: REDIS_URL must start with redis://');
  });

  it('admits across two replicas up to the global limit, serves readiness, and exits 0 on SIGTERM', async () => {
    const a = start({ SCHEDULER_GLOBAL_SLOTS: '3' });
    const b = start({ SCHEDULER_GLOBAL_SLOTS: '3' });
    const [sa] = await Promise.all([
      a.waitForLog((l) => l.msg === 'scheduler started'),
      b.waitForLog((l) => l.msg === 'scheduler started'),
    ]);
    expect((await fetch(`http://127.0.0.1:${sa.healthPort}/readyz`)).status).toBe(200);
    const jobs = new Queue(QueueNames.jobs, { connection: redis, prefix: keys.bullPrefix });
    for (let i = 0; i < 8; i++) {
      const id = `${ns}-j${i}`;
      ids.push(id);
      await submitParsedJob(
        store,
        jobs,
        parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }),
      );
    }
    await jobs.close();
    const until = Date.now() + 10_000;
    let scheduled = 0;
    while (Date.now() < until) {
      scheduled = (await store.list({ state: 'scheduled', limit: 100 })).length;
      if (scheduled >= 3) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    // The other five were each looked at and refused (parked as waiters), not merely not reached.
    await expect.poll(() => redis.zcard(keys.capacityWaiting), { timeout: 10_000 }).toBe(5);
    expect((await store.list({ state: 'scheduled', limit: 100 })).length).toBe(3);
    expect((await store.list({ state: 'queued', limit: 100 })).length).toBe(5);
    a.signal('SIGTERM');
    b.signal('SIGTERM');
    expect(await a.exitCode()).toBe(0);
    expect(await b.exitCode()).toBe(0);
  });
});
