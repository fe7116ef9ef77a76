import { createKeySpace, QueueNames } from '@sandstream/bus';
import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { Worker } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { SandstreamClient, type SandstreamWarning } from './client.js';
import { SchedulerPresence } from './scheduler-presence.js';

describe('SchedulerPresence', () => {
  it('warns while no worker is connected, then trusts a sighting for a while', async () => {
    let workers = 0;
    let calls = 0;
    let now = 0;
    const presence = new SchedulerPresence(
      {
        getWorkersCount: async () => {
          calls++;
          return workers;
        },
      },
      'ns',
      () => now,
    );
    expect(await presence.check()).toMatchObject({ code: 'no-scheduler', namespace: 'ns' });
    workers = 1;
    expect(await presence.check()).toBeNull();
    workers = 0;
    now += 10_000;
    expect(await presence.check()).toBeNull(); // seen 10 s ago: no CLIENT LIST
    expect(calls).toBe(2);
    now += 30_000;
    expect(await presence.check()).toMatchObject({ code: 'no-scheduler' });
  });

  it('shares one CLIENT LIST between concurrent checks, and stays quiet when it cannot tell', async () => {
    let calls = 0;
    const slow = new SchedulerPresence(
      // A slow CLIENT LIST on purpose: the checks below must overlap one call in flight.
      { getWorkersCount: () => new Promise((r) => setTimeout(() => r(++calls && 0), 20)) },
      'ns',
    );
    await Promise.all([slow.check(), slow.check(), slow.check()]);
    expect(calls).toBe(1);
    const refused = new SchedulerPresence(
      {
        getWorkersCount: () =>
          Promise.reject(new Error("NOPERM this user has no permissions to run the 'client|list' command")),
      },
      'ns',
    );
    expect(await refused.check()).toBeNull();
  });
});

describe('submit to a namespace no scheduler serves', () => {
  const namespace = `presence-${uniqueSuffix()}`;
  const keys = createKeySpace(namespace);
  const redis = connectTestRedis();
  const warnings: SandstreamWarning[] = [];
  const client = new SandstreamClient({ redis, namespace, onWarning: (w) => warnings.push(w) });
  const workerRedis = connectTestRedis();
  let worker: Worker | undefined;

  afterAll(async () => {
    await worker?.close();
    workerRedis.disconnect();
    await client.close();
    redis.disconnect();
  });

  it('warns through onWarning, and not once a scheduler (a jobs-queue worker) is connected', async () => {
    await client.submit({ id: `${namespace}-1`, image: 'none', steps: [{ command: 'true' }] });
    expect(warnings).toEqual([
      expect.objectContaining({
        code: 'no-scheduler',
        namespace,
        message: expect.stringContaining(namespace),
      }),
    ]);
    // What the scheduler holds while it runs: a Worker on the namespace's jobs queue.
    worker = new Worker(QueueNames.jobs, null, {
      connection: workerRedis,
      prefix: keys.bullPrefix,
      autorun: false,
    });
    await worker.waitUntilReady();
    const fresh = new SandstreamClient({ redis, namespace, onWarning: (w) => warnings.push(w) });
    await fresh.submit({ id: `${namespace}-2`, image: 'none', steps: [{ command: 'true' }] });
    await fresh.close();
    expect(warnings).toHaveLength(1);
  });
});
