import { describe, expect, it } from 'vitest';
import { LatencyWindow } from './latency-window.js';

describe('LatencyWindow', () => {
  it('reports percentiles of one window, then starts afresh', () => {
    const w = new LatencyWindow();
    for (let i = 1; i <= 100; i++) w.record(i);
    expect(w.drain()).toEqual({ count: 100, p50: 51, p99: 100, max: 100 });
    expect(w.drain()).toBeNull();
  });

  it('stays bounded under a burst but still counts every sample', () => {
    const w = new LatencyWindow(1000);
    for (let i = 0; i < 100_000; i++) w.record(i % 10);
    expect((w as unknown as { samples: number[] }).samples.length).toBeLessThanOrEqual(1000);
    const report = w.drain();
    expect(report?.count).toBe(100_000);
    expect(report?.max).toBe(9);
  });
});
