import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
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
    await sleep(200);
    await task.stop();
    expect(runs).toBeGreaterThan(1);
    expect(maxActive).toBe(1);
    expect(finished).toBe(runs);
    const after = runs;
    await sleep(50);
    expect(runs).toBe(after);
  });
});
