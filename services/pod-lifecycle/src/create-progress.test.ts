import type { CreateProgress } from '@sandstream/bus';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { CreateProgressReporter, describeProgress } from './create-progress.js';

const at = (downloadedBytes: number, done = false): CreateProgress => ({
  phase: 'image-pull',
  image: 'localhost:5000/x:1',
  layers: 2,
  layersDone: done ? 2 : 1,
  downloadedBytes,
  totalBytes: 3_000_000,
  done,
});

describe('CreateProgressReporter', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sends the first report, then the latest one per interval, then the last, in order', async () => {
    vi.useFakeTimers();
    const sent: number[] = [];
    const reporter = new CreateProgressReporter(
      async (p) => {
        sent.push(p.downloadedBytes);
      },
      () => {},
      1000,
    );
    reporter.report(at(1));
    for (let b = 2; b <= 50; b++) reporter.report(at(b));
    await vi.advanceTimersByTimeAsync(0);
    // The first at once; the 49 after it wait for the interval, and only the latest of them goes.
    expect(sent).toEqual([1]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(sent).toEqual([1, 50]);
    reporter.report(at(60));
    reporter.report(at(3_000_000, true));
    await reporter.flush();
    // `done` goes at once, replacing what was pending.
    expect(sent).toEqual([1, 50, 3_000_000]);
    reporter.close();
  });

  it('a failed write is reported and does not stop the next one', async () => {
    const errors: unknown[] = [];
    const sent: boolean[] = [];
    let fail = true;
    const reporter = new CreateProgressReporter(
      async (p) => {
        if (fail) {
          fail = false;
          throw new Error('redis away');
        }
        sent.push(p.done);
      },
      (err) => errors.push(err),
      0,
    );
    reporter.report(at(1));
    reporter.report(at(3_000_000, true));
    await reporter.flush();
    expect(errors).toHaveLength(1);
    expect(sent).toEqual([true]);
  });

  it('says it in words', () => {
    expect(describeProgress(at(1_500_000))).toBe(
      'pulling image localhost:5000/x:1: 1/2 layers, 1.5 MB of 3.0 MB',
    );
    expect(describeProgress(at(3_000_000, true))).toBe('pulled image localhost:5000/x:1 (2 layers, 3.0 MB)');
  });
});
