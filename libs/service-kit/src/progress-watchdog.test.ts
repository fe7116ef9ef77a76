import { describe, expect, it } from 'vitest';
import { ProgressWatchdog } from './progress-watchdog.js';

describe('ProgressWatchdog', () => {
  it('fails the readiness check of a loop that has not beaten within its limit, and only that one', async () => {
    let now = 0;
    const watchdog = new ProgressWatchdog(() => now);
    const beatA = watchdog.track('a', 1000);
    watchdog.track('b', 1000);
    now = 1500;
    beatA();
    expect(watchdog.stalled()).toEqual(['b']);
    const checks = watchdog.checks();
    expect(Object.keys(checks)).toEqual(['loop:a', 'loop:b']);
    expect(await checks['loop:a']!()).toBe(true);
    expect(await checks['loop:b']!()).toBe(false);
  });
});
