import { fileURLToPath } from 'node:url';
import { createKeySpace, JobStore, logArchiveNames, parseJobSpec } from '@sandstream/bus';
import {
  deleteNamespaceKeys,
  ServiceProcess,
  startNatsServer,
  startRedisServer,
  testRedisUrl,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { connect } from 'nats';
import { afterAll, describe, expect, it, vi } from 'vitest';

// The built service, as production runs it (npx tsc -b services/reaper).
const entry = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const url = testRedisUrl();
const ns = `t-reapmain-${Math.random().toString(36).slice(2, 10)}`;
const keys = createKeySpace(ns);
const redis = new Redis(url, { maxRetriesPerRequest: null });
const store = new JobStore({ redis, keys });
const procs: ServiceProcess[] = [];

afterAll(async () => {
  for (const p of procs) await p.stop();
  await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

describe('reaper process', () => {
  it('deletes a finished job past retention on its first pass, keeps a live one, and exits 0 on SIGTERM', async () => {
    const done = `${ns}-done`;
    const live = `${ns}-live`;
    for (const id of [done, live]) {
      await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    }
    await store.transition(done, ['queued'], 'cancelled');
    // Time itself is what is tested: the finished job must be older than the 1 s retention.
    await new Promise((r) => setTimeout(r, 1100));
    // Retention 0 would reach every finished job on this shared Redis. The namespace does not
    // scope job records (job ids do), so this reaper is pointed at this test's ids only.
    const p = new ServiceProcess(entry, {
      REDIS_URL: url,
      SANDSTREAM_NAMESPACE: ns,
      HEALTH_PORT: '0',
      REAPER_RETENTION_SECONDS: '1',
      REAPER_SANDBOXES: 'off',
      SANDBOX_ACL: 'off',
      REAPER_JOB_GLOB: `${ns}-*`,
    });
    procs.push(p);
    const report = await p.waitForLog((l) => l.msg === 'reaper pass done');
    expect(report.jobsDeleted).toBe(1);
    expect(await redis.exists(keys.job(done))).toBe(0);
    expect((await store.get(live))?.state).toBe('queued');
    p.signal('SIGTERM');
    expect(await p.exitCode()).toBe(0);
  });

  it('relays lifecycle events to NATS when NATS_URL is set', async () => {
    const nats = await connect({ servers: process.env.NATS_URL ?? 'nats://127.0.0.1:4222' });
    const subjects: string[] = [];
    // Lifecycle subjects only: the log archive publishes the job's output under `….logs.<id>`.
    const sub = nats.subscribe(`sandstream.${ns}.lifecycle.>`, {
      callback: (_e, m) => subjects.push(m.subject),
    });
    const p = new ServiceProcess(entry, {
      REDIS_URL: url,
      SANDSTREAM_NAMESPACE: ns,
      HEALTH_PORT: '0',
      REAPER_SANDBOXES: 'off',
      SANDBOX_ACL: 'off',
      REAPER_JOB_GLOB: `${ns}-*`,
      NATS_URL: process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
    });
    procs.push(p);
    const started = await p.waitForLog((l) => l.msg === 'reaper started');
    expect(started.natsRelay).toBe(true);
    const archive = logArchiveNames({ namespace: ns }).stream;
    expect(started.logArchive).toBe(archive);
    // The relay's group starts at the stream's end: wait until it exists.
    await vi.waitUntil(
      async () =>
        (await redis.exists(keys.lifecycleStream)) === 1 &&
        ((await redis.xinfo('GROUPS', keys.lifecycleStream)) as unknown[]).length > 0,
      { timeout: 20_000, interval: 20 },
    );
    const id = `${ns}-relayed`;
    await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
    await store.transition(id, ['queued'], 'cancelled');
    await vi.waitUntil(() => subjects.length >= 2, { timeout: 20_000, interval: 20 });
    expect(subjects).toEqual([
      `sandstream.${ns}.lifecycle.acme.queued`,
      `sandstream.${ns}.lifecycle.acme.cancelled`,
    ]);
    p.signal('SIGTERM');
    expect(await p.exitCode()).toBe(0);
    sub.unsubscribe();
    // The machine's NATS is shared: the test's archive stream goes with the test.
    const jsm = await nats.jetstreamManager();
    await jsm.streams.delete(archive).catch(() => false);
    await nats.close();
  });

  it('exits 0 within its grace on SIGTERM while its Redis is down, with the relay and log archive on', async () => {
    // A Redis that was there and is gone; the relay's and archiver's connections wait for it
    // forever (maxRetriesPerRequest: null), which must not hold the shutdown.
    const down = await startRedisServer();
    await down.stop();
    const nats = await startNatsServer({ jetstream: true });
    try {
      const p = new ServiceProcess(entry, {
        REDIS_URL: down.url,
        SANDSTREAM_NAMESPACE: ns,
        HEALTH_PORT: '0',
        REAPER_SANDBOXES: 'off',
        SANDBOX_ACL: 'off',
        REAPER_JOB_GLOB: `${ns}-*`,
        NATS_URL: nats.url,
      });
      procs.push(p);
      const started = await p.waitForLog((l) => l.msg === 'reaper started');
      expect(started.logArchive).not.toBe('off');
      // Until its loops are stuck on the missing Redis: the first pass has failed.
      await p.waitForLog((l) => l.msg === 'reaper pass failed');
      p.signal('SIGTERM');
      // Its own budget is 30 s (then it exits 1 with work unfinished): well within it.
      expect(await p.exitCode(10_000)).toBe(0);
    } finally {
      await nats.stop();
    }
  });
});
