import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import {
  AdaptiveTask,
  ALIGN_LONG_PAUSES_MS,
  ALIGN_PAUSES_MS,
  alignedWake,
  type RoundOutcome,
} from './adaptive-task.js';
import { onTick, pendingTicks } from './shared-tick.js';

/** A task whose rounds answer `outcome()`, recording when each round started. */
function recorded(outcome: () => RoundOutcome, options: { intervalMs: number; idleMaxMs: number }) {
  const starts: number[] = [];
  const task = new AdaptiveTask(async () => {
    starts.push(Date.now());
    return outcome();
  }, options);
  return { task, starts };
}

describe('AdaptiveTask', () => {
  it('backs off while its rounds find nothing: each pause at least doubles', async () => {
    const { task, starts } = recorded(() => 'idle', { intervalMs: 10, idleMaxMs: 60_000 });
    task.start();
    await vi.waitUntil(() => starts.length >= 6, { timeout: 20_000, interval: 5 });
    await task.stop();
    // Pauses of 10, 20, 40, 80, 160 ms after the first round: lower bounds only (a busy machine
    // only lengthens them). A fixed-rate loop would fail from the third gap on.
    const gaps = starts.slice(1).map((t, i) => t - (starts[i] ?? 0));
    for (const [i, gap] of gaps.entries()) expect(gap).toBeGreaterThanOrEqual(10 * 2 ** i - 2);
  });

  it('wake() brings a round forward from a long pause, also when it comes during a round', async () => {
    let slow = false;
    const starts: number[] = [];
    const task = new AdaptiveTask(
      async () => {
        starts.push(Date.now());
        if (slow) await sleep(100);
        return { nextAt: Date.now() + 600_000 };
      },
      { intervalMs: 10, idleMaxMs: 600_000 },
    );
    task.start();
    await vi.waitUntil(() => starts.length === 1, { timeout: 10_000, interval: 5 });
    // The next round is ten minutes away: only the wake-up brings it.
    task.wake();
    await vi.waitUntil(() => starts.length === 2, { timeout: 10_000, interval: 5 });
    slow = true;
    task.wake();
    await vi.waitUntil(() => starts.length === 3, { timeout: 10_000, interval: 5 });
    // Woken while that round runs: one more round right after it, not ten minutes later.
    task.wake();
    await vi.waitUntil(() => starts.length === 4, { timeout: 10_000, interval: 5 });
    await task.stop();
    task.wake();
    await sleep(50);
    expect(starts).toHaveLength(4);
  });

  it('runs when the work it reported is due, and never two rounds at once', async () => {
    let active = 0;
    let maxActive = 0;
    const starts: number[] = [];
    let dueAt = 0;
    const task = new AdaptiveTask(
      async () => {
        starts.push(Date.now());
        active++;
        maxActive = Math.max(maxActive, active);
        await sleep(20);
        active--;
        dueAt = Date.now() + 150;
        return { nextAt: dueAt };
      },
      { intervalMs: 1, idleMaxMs: 600_000 },
    );
    task.start();
    for (let i = 0; i < 5; i++) task.wake();
    await vi.waitUntil(() => starts.length >= 3, { timeout: 10_000, interval: 5 });
    await task.stop();
    expect(maxActive).toBe(1);
    // Not before it was due.
    expect(starts[2]).toBeGreaterThanOrEqual((starts[1] ?? 0) + 150);
  });

  it('a round that rejects raises no unhandled rejection, is logged once per streak, backs off', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    let attempts = 0;
    let progress = 0;
    const warned: unknown[] = [];
    const recovered: unknown[] = [];
    const task = new AdaptiveTask(
      async () => {
        attempts++;
        if (attempts <= 4) throw new Error('Connection is closed.');
        return 'idle';
      },
      {
        intervalMs: 5,
        idleMaxMs: 600_000,
        maxBackoffMs: 40,
        name: 'test',
        logger: { warn: (fields) => warned.push(fields), info: (fields) => recovered.push(fields) },
        onProgress: () => progress++,
      },
    );
    task.start();
    await vi.waitUntil(() => progress > 0, { timeout: 20_000, interval: 5 });
    await task.stop();
    process.off('unhandledRejection', onUnhandled);
    expect(unhandled).toEqual([]);
    expect(warned).toHaveLength(1);
    expect(recovered).toHaveLength(1);
  });

  it('ends pauses of a second or more on a whole second, so the loops of one process wake together', async () => {
    expect(alignedWake(10_250, 9_000)).toBe(11_000);
    expect(alignedWake(12_000, 10_000)).toBe(12_000);
    // Short pauses are not moved: a busy loop keeps its pace.
    expect(alignedWake(10_250, 10_000)).toBe(10_250);
    const ends: number[] = [];
    const starts: number[] = [];
    const task = new AdaptiveTask(
      async () => {
        starts.push(Date.now());
        // A round that takes a while ends off the whole second its start may have been on.
        await sleep(30);
        ends.push(Date.now());
        return 'idle';
      },
      { intervalMs: ALIGN_PAUSES_MS, idleMaxMs: ALIGN_PAUSES_MS },
    );
    task.start();
    await vi.waitUntil(() => starts.length >= 3, { timeout: 20_000, interval: 20 });
    await task.stop();
    // Each round after the first starts no earlier than the whole second after its pause ends
    // (timers only fire late, give or take libuv's cached clock): without the alignment it starts
    // about a pause after the last.
    for (let i = 1; i < starts.length; i++) {
      const due = Math.ceil(((ends[i - 1] as number) + ALIGN_PAUSES_MS) / ALIGN_PAUSES_MS) * ALIGN_PAUSES_MS;
      expect(starts[i]).toBeGreaterThanOrEqual(due - 15);
    }
  });
});

describe('the shared tick', () => {
  it('ends pauses of 5 s or more on a multiple of 5 s, never later than asked', () => {
    expect(ALIGN_LONG_PAUSES_MS).toBe(5000);
    expect(alignedWake(17_300, 12_000)).toBe(15_000);
    expect(alignedWake(15_000, 10_000)).toBe(15_000);
    expect(alignedWake(70_100, 10_100)).toBe(70_000);
    // Between 1 and 5 s: the next whole second, as before.
    expect(alignedWake(14_250, 10_000)).toBe(15_000);
  });

  it('runs loops due at the same time from one timer, and a stopped one no more', async () => {
    // Not right before a multiple of 5 s, so both tasks' first pauses end on the same one.
    while (Date.now() % ALIGN_LONG_PAUSES_MS > 3_000) await sleep(50);
    const timers = vi.spyOn(globalThis, 'setTimeout');
    const a = recorded(() => 'busy', { intervalMs: 5_000, idleMaxMs: 5_000 });
    const b = recorded(() => 'busy', { intervalMs: 5_000, idleMaxMs: 5_000 });
    try {
      a.task.start();
      await sleep(20);
      b.task.start();
      // One Node timer for both (a timer each fired a few ms apart: two wake-ups). Only timers
      // of a second or more count: the test runner may set short ones of its own meanwhile.
      expect(timers.mock.calls.filter(([, ms]) => (ms ?? 0) >= 1_000)).toHaveLength(1);
      expect(pendingTicks()).toBe(1);
      await vi.waitUntil(() => a.starts.length === 1 && b.starts.length === 1, {
        timeout: 10_000,
        interval: 20,
      });
      // Both rounds start in that timer's one callback (the millisecond may turn between the
      // two reads of the clock); when the tick falls is alignedWake's (the case above).
      expect(Math.abs((a.starts[0] ?? 0) - (b.starts[0] ?? 0))).toBeLessThanOrEqual(1);
      await a.task.stop();
      await vi.waitUntil(() => b.starts.length === 2, { timeout: 10_000, interval: 20 });
      expect(a.starts).toHaveLength(1);
    } finally {
      timers.mockRestore();
      await a.task.stop();
      await b.task.stop();
    }
    expect(pendingTicks()).toBe(0);
  });

  it('onTick: a cancelled callback does not run, the others do, and one that throws spares the rest', async () => {
    const ran: string[] = [];
    const at = Date.now() + 50;
    const cancel = onTick(at, () => ran.push('cancelled'));
    onTick(at, () => {
      ran.push('throws');
      throw new Error('boom');
    });
    onTick(at, () => ran.push('kept'));
    cancel();
    const uncaught: unknown[] = [];
    const listeners = process.listeners('uncaughtException');
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', (err) => uncaught.push(err));
    try {
      await vi.waitUntil(() => ran.length === 2, { timeout: 5_000, interval: 10 });
      await sleep(20);
    } finally {
      process.removeAllListeners('uncaughtException');
      for (const listener of listeners) process.on('uncaughtException', listener);
    }
    expect(ran).toEqual(['throws', 'kept']);
    expect(uncaught).toHaveLength(1);
    expect(pendingTicks()).toBe(0);
  });
});
