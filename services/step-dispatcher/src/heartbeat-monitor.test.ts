import { createKeySpace, DispatcherPresence, DispatchKeys, SandboxLiveness } from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { connectTestRedis, deleteNamespaceKeys, uniqueNamespace } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { HeartbeatMonitor } from './heartbeat-monitor.js';

// The dispatcher's half of the late-heartbeat check against real Redis: a running job without a
// heartbeat becomes a suspect, and what pod-lifecycle answers (written here as its
// LivenessProber writes it) decides: gone → lost at once; running → more time, then lost with
// its own reason past lateMaxMs; no answer → lost after verdictWaitMs; a heartbeat back clears it.
const redis = connectTestRedis();
const namespaces: string[] = [];
afterAll(async () => {
  for (const ns of namespaces) await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

function setup(limits: {
  verdictWaitMs: number;
  lateMaxMs: number;
  lockedOut?: (jobId: string) => Promise<string | undefined>;
  verdictPollMs?: number;
}) {
  const ns = uniqueNamespace('t-hbmon');
  namespaces.push(ns);
  const keySpace = createKeySpace(ns);
  const keys = new DispatchKeys(keySpace, 1);
  const liveness = new SandboxLiveness(redis, keySpace);
  const lost: { jobId: string; detail: string | undefined; reason?: string }[] = [];
  const monitor = new HeartbeatMonitor({
    redis,
    keys,
    logger: silentLogger('hb-test'),
    onLost: async (jobId, detail, reason) => {
      lost.push({ jobId, detail, ...(reason ? { reason } : {}) });
      await redis.zrem(keys.running(0), jobId);
    },
    intervalMs: 200,
    graceMs: 0,
    reconnectGraceMs: 0,
    // The cases below answer between rounds: a round does not wait for the verdict unless asked.
    liveness: { store: liveness, verdictPollMs: 0, ...limits },
  });
  const running = async (name: string) => {
    const jobId = `${ns}-${name}`;
    await redis.zadd(keys.running(0), Date.now() - 60_000, jobId);
    return jobId;
  };
  /** One round (the round's lock lives 100 ms: wait it out so every call judges). */
  const round = async () => {
    await redis.del(keys.lock('heartbeat-check'));
    await monitor.check();
  };
  return { liveness, lost, running, round, ns, keySpace };
}

describe('heartbeat monitor with the backend verdict', () => {
  it('fails a gone sandbox at once, keeps a running one, and clears a suspect that beats again', async () => {
    const t = setup({ verdictWaitMs: 60_000, lateMaxMs: 60_000 });
    const gone = await t.running('gone');
    const slow = await t.running('slow');
    await t.round();
    expect(t.lost).toEqual([]);
    expect((await t.liveness.suspects()).sort()).toEqual([gone, slow].sort());
    await t.liveness.record(gone, 'gone');
    await t.liveness.record(slow, 'running');
    await t.round();
    expect(t.lost).toEqual([{ jobId: gone, detail: 'its sandbox no longer runs' }]);
    // The starved agent beats again: no longer suspect.
    await redis.set(sandboxKeys(slow, 'tagged').heartbeat, '{}', 'PX', 10_000);
    await t.round();
    expect(await t.liveness.suspects()).toEqual([]);
    expect(t.lost).toHaveLength(1);
    await redis.del(sandboxKeys(slow, 'tagged').heartbeat);
  });

  it('fails a running but silent sandbox after lateMaxMs, saying so', async () => {
    const t = setup({ verdictWaitMs: 60_000, lateMaxMs: 1_500 });
    const hung = await t.running('hung');
    await t.round();
    await t.liveness.record(hung, 'running');
    await t.round();
    expect(t.lost).toEqual([]);
    await expect
      .poll(
        async () => {
          await t.liveness.record(hung, 'running');
          await t.round();
          return t.lost.map((l) => l.detail);
        },
        { timeout: 20_000, interval: 300 },
      )
      .toEqual([expect.stringMatching(/still runs, but the agent has been silent for \d+ s/)]);
    expect(await t.liveness.suspects()).toEqual([]);
  });

  it('without a verdict (no pod-lifecycle), fails after verdictWaitMs as before', async () => {
    const t = setup({ verdictWaitMs: 1_000, lateMaxMs: 60_000 });
    const orphan = await t.running('orphan');
    await t.round();
    expect(t.lost).toEqual([]);
    await expect
      .poll(
        async () => {
          await t.round();
          return t.lost.map((l) => l.detail);
        },
        { timeout: 20_000, interval: 300 },
      )
      .toEqual([expect.stringMatching(/no pod-lifecycle confirmed within \d+ s/)]);
    expect(orphan).toContain(t.ns);
  });

  it('fails a running sandbox whose agent is locked out at once, handing on the reason it found', async () => {
    const asked: string[] = [];
    const t = setup({
      verdictWaitMs: 60_000,
      lateMaxMs: 60_000,
      lockedOut: async (jobId) => {
        asked.push(jobId);
        return jobId.endsWith('-locked') ? 'sandbox lost: its Redis user is gone' : undefined;
      },
    });
    const locked = await t.running('locked');
    const slow = await t.running('slow');
    await t.round();
    await t.liveness.record(locked, 'running');
    await t.liveness.record(slow, 'running');
    await t.round();
    // The reason goes with the loss, so the dispatcher does not look the user up again.
    expect(t.lost).toEqual([
      { jobId: locked, detail: undefined, reason: 'sandbox lost: its Redis user is gone' },
    ]);
    expect(asked.filter((id) => id === locked)).toHaveLength(1);
  });

  it('fails a new suspect found gone in the same round: pod-lifecycle is woken by it, the round waits for its verdict', async () => {
    const t = setup({ verdictWaitMs: 60_000, lateMaxMs: 60_000, verdictPollMs: 15_000 });
    const gone = await t.running('gone-now');
    // pod-lifecycle's side as its main wires it: a subscriber hears each new suspect once.
    const subscriber = redis.duplicate();
    const heard: number[] = [];
    try {
      await t.liveness.listen(subscriber, () => {
        heard.push(Date.now());
        // A backend call takes a while: the verdict lands after the round first looked.
        setTimeout(() => void t.liveness.record(gone, 'gone'), 300);
      });
      await t.round();
      expect(t.lost).toEqual([{ jobId: gone, detail: 'its sandbox no longer runs' }]);
      expect(heard).toHaveLength(1);
      // A job is announced when it becomes suspect, not again while it stays one.
      const other = `${t.ns}-other`;
      await t.liveness.suspect(other);
      await t.liveness.suspect(other);
      await expect.poll(() => heard.length).toBe(2);
      await redis.ping();
      expect(heard).toHaveLength(2);
    } finally {
      subscriber.disconnect();
    }
  });
});

describe('heartbeat monitor at rest', () => {
  it('while nothing runs it only stamps the presence and backs off; a job started here wakes it', async () => {
    const ns = uniqueNamespace('t-hbrest');
    namespaces.push(ns);
    const keySpace = createKeySpace(ns);
    const keys = new DispatchKeys(keySpace, 1);
    /** Counts the rounds: each stamps once. */
    class CountingPresence extends DispatcherPresence {
      stamps: number[] = [];
      override async stamp(instance: string, now = Date.now()): Promise<void> {
        this.stamps.push(now);
        await super.stamp(instance, now);
      }
    }
    const presence = new CountingPresence(redis, keys);
    const monitor = new HeartbeatMonitor({
      redis,
      keys,
      logger: silentLogger('hb-rest'),
      onLost: async () => {},
      intervalMs: 100,
      idleMaxMs: 5_000,
      graceMs: 0,
      reconnectGraceMs: 0,
      presence: { presence, instance: 'rest-test' },
      anyRunning: async () => false,
    });
    monitor.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      // At its pace (100 ms) that is ~20 rounds; resting, its pauses double from the second.
      expect(presence.stamps.length).toBeGreaterThanOrEqual(3);
      expect(presence.stamps.length).toBeLessThanOrEqual(8);
      const before = presence.stamps.length;
      const woken = Date.now();
      monitor.noteRunning();
      await vi.waitUntil(() => presence.stamps.length > before, { timeout: 1_000, interval: 10 });
      expect((presence.stamps.at(-1) ?? 0) - woken).toBeLessThan(500);
    } finally {
      await monitor.stop();
    }
  });
});
