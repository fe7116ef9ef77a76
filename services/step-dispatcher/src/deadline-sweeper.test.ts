import { createKeySpace, type Deadline, DispatchKeys, deadlineMember } from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { connectTestRedis, deleteNamespaceKeys, uniqueNamespace } from '@sandstream/test-support';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { DeadlineSweeper } from './deadline-sweeper.js';

// The sweeper sleeps until the earliest deadline in Redis (at most idleMaxMs) instead of sweeping
// every 250 ms. Here idleMaxMs is ten minutes: a deadline is handled in time only because the
// sweeper read when it is due, or because the process that set it woke the sweeper.
const redis = connectTestRedis();
const namespaces: string[] = [];
afterAll(async () => {
  for (const ns of namespaces) await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

function setup() {
  const ns = uniqueNamespace('t-sweep');
  namespaces.push(ns);
  const keys = new DispatchKeys(createKeySpace(ns), 2);
  const handled: { deadline: Deadline; at: number }[] = [];
  let sweeps = 0;
  const sweeper = new DeadlineSweeper({
    redis,
    keys,
    logger: silentLogger('sweep-test'),
    handle: async (deadline) => {
      handled.push({ deadline, at: Date.now() });
      return undefined;
    },
    intervalMs: 50,
    idleMaxMs: 600_000,
    onProgress: () => sweeps++,
  });
  return { keys, sweeper, handled, sweeps: () => sweeps };
}

describe('DeadlineSweeper', () => {
  it('handles a deadline set by this process when it is due, though the sweeper was resting', async () => {
    const { keys, sweeper, handled, sweeps } = setup();
    // The earliest deadline is an hour away: the sweeper sleeps ten minutes (idleMaxMs).
    await redis.zadd(keys.deadlines(0), Date.now() + 3_600_000, deadlineMember({ kind: 'job', jobId: 'j0' }));
    sweeper.start();
    try {
      await vi.waitUntil(() => sweeps() >= 1, { timeout: 20_000, interval: 10 });
      await new Promise((r) => setTimeout(r, 2000));
      // One sweep, not one every 250 ms (8 in these 2 s before it rested).
      expect(sweeps()).toBe(1);
      const at = Date.now() + 300;
      await redis.zadd(keys.deadlines(1), at, deadlineMember({ kind: 'job', jobId: 'j1' }));
      sweeper.wake(at);
      await vi.waitUntil(() => handled.length === 1, { timeout: 20_000, interval: 10 });
      expect(handled[0]?.deadline).toEqual({ kind: 'job', jobId: 'j1' });
      // Not before it was due.
      expect(handled[0]?.at).toBeGreaterThanOrEqual(at);
      expect(await redis.zcard(keys.deadlines(1))).toBe(0);
      // The woken sweep, and at most one more: a timer may fire a hair before the deadline's
      // millisecond (seen in CI), find nothing due yet, and sleep until it again. Waited for: the
      // handler ran, but the sweep counts only once it has removed the deadline and returned,
      // which the ZCARD's reply above may overtake (seen failing 1 run in 5 under load).
      await vi.waitUntil(() => sweeps() >= 2, { timeout: 5_000, interval: 10 });
      expect(sweeps()).toBeLessThanOrEqual(3);
    } finally {
      await sweeper.stop();
    }
  });

  it('sleeps until the earliest deadline already in Redis (set by another instance)', async () => {
    const { keys, sweeper, handled } = setup();
    const at = Date.now() + 1500;
    await redis.zadd(keys.deadlines(0), at, deadlineMember({ kind: 'cancel', jobId: 'j2' }));
    // A later one on the other shard: due only after the test ends.
    await redis.zadd(keys.deadlines(1), Date.now() + 3_600_000, deadlineMember({ kind: 'job', jobId: 'j3' }));
    sweeper.start();
    try {
      await vi.waitUntil(() => handled.length === 1, { timeout: 20_000, interval: 10 });
      expect(handled[0]?.deadline).toEqual({ kind: 'cancel', jobId: 'j2' });
      expect(handled[0]?.at).toBeGreaterThanOrEqual(at);
    } finally {
      await sweeper.stop();
    }
  });
});
