import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { Worker } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeySpace } from './key-space.js';
import { QueueNames } from './queues.js';
import { SNAPSHOT_WORKER_OPTIONS, SnapshotRequests } from './snapshot-requests.js';

const redis = connectTestRedis();
const namespace = `t-${uniqueSuffix()}`;
const keys = createKeySpace(namespace);
const cleanups: (() => Promise<unknown>)[] = [];

afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  const found = await redis.keys(`${keys.bullPrefix}:*`);
  if (found.length) await redis.unlink(...found);
  redis.disconnect();
});

/** A pod-lifecycle replica's snapshot worker, with short locks so a dead one is noticed soon. */
function replica(processor: () => Promise<unknown>) {
  const connection = redis.duplicate({ maxRetriesPerRequest: null });
  const worker = new Worker(QueueNames.sandboxSnapshot, processor, {
    connection,
    prefix: keys.bullPrefix,
    ...SNAPSHOT_WORKER_OPTIONS,
    lockDuration: 1500,
    stalledInterval: 500,
  });
  worker.on('error', () => {});
  cleanups.push(async () => {
    await worker.close(true);
    connection.disconnect();
  });
  return { worker, connection };
}

describe('snapshot requests whose replica dies', () => {
  it('fail with a message saying so, and are not captured again by another replica', async () => {
    const requests = new SnapshotRequests(redis.duplicate(), keys);
    cleanups.push(() => requests.close());
    let runs = 0;
    let started: () => void = () => {};
    const begun = new Promise<void>((resolve) => {
      started = resolve;
    });
    // The first replica takes the capture and dies in the middle: its connection drops, so its
    // lock is never renewed and never released.
    const dying = replica(() => {
      runs += 1;
      started();
      return new Promise(() => {});
    });
    const answer = requests
      .capture(
        { op: 'capture', sandboxId: `sbx-${uniqueSuffix()}`, snapshotId: `snap-${uniqueSuffix()}` },
        60_000,
      )
      .then(
        () => 'taken',
        (err: Error) => err.message,
      );
    await begun;
    dying.connection.disconnect();
    await dying.worker.close(true);
    // A second replica notices the stalled request.
    replica(async () => {
      runs += 1;
      return { snapshotId: 'retried' };
    });

    const outcome = await answer;
    expect(outcome).toMatch(/^failed: the pod-lifecycle replica working on this capture request stopped/);
    expect(runs).toBe(1);
  }, 60_000);
});
