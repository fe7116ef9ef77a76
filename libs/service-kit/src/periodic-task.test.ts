import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, vi } from 'vitest';
import { PeriodicTask } from './periodic-task.js';

describe('PeriodicTask', () => {
  it('never overlaps runs, and stop() waits for the run in flight', async () => {
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    let finished = 0;
    const task = new PeriodicTask(async () => {
      runs++;
      active++;
      maxActive = Math.max(maxActive, active);
      await sleep(60); // longer than the interval: later ticks must be skipped, not stacked
      active--;
      finished++;
    }, 10);
    task.start();
    await expect.poll(() => runs, { timeout: 10_000 }).toBeGreaterThan(2);
    await task.stop();
    expect(runs).toBeGreaterThan(1);
    expect(maxActive).toBe(1);
    expect(finished).toBe(runs);
    const after = runs;
    // A witness on the same 10 ms interval: once it has ticked a few times, a stopped task that
    // still ticked would have run again too.
    let witnessed = 0;
    const witness = new PeriodicTask(async () => {
      witnessed++;
    }, 10);
    witness.start();
    await expect.poll(() => witnessed, { timeout: 10_000 }).toBeGreaterThanOrEqual(5);
    await witness.stop();
    expect(runs).toBe(after);
  });
});

describe('PeriodicTask when its run rejects (Redis down)', () => {
  it('raises no unhandled rejection, backs off, and reports progress again once runs succeed', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    let failing = true;
    let attempts = 0;
    let progress = 0;
    let recovered!: () => void;
    const back = new Promise<void>((resolve) => {
      recovered = resolve;
    });
    const warned: unknown[] = [];
    const task = new PeriodicTask(
      async () => {
        attempts++;
        if (failing) throw new Error('Connection is closed.');
      },
      5,
      {
        name: 'test',
        logger: { warn: (fields) => warned.push(fields), info: () => {} },
        onProgress: () => {
          progress++;
          recovered();
        },
        maxBackoffMs: 40,
      },
    );
    task.start();
    await vi.waitUntil(() => attempts >= 4, { timeout: 20_000, interval: 5 });
    failing = false;
    await back;
    await task.stop();
    process.off('unhandledRejection', onUnhandled);
    expect(unhandled).toEqual([]);
    expect(progress).toBeGreaterThan(0);
    // One line per streak of failures, not one per attempt.
    expect(warned).toHaveLength(1);
  });
});
