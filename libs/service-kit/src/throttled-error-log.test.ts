import { afterEach, describe, expect, it, vi } from 'vitest';
import { throttledErrorLog } from './throttled-error-log.js';

describe('throttledErrorLog', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  // The clock is the thing tested here (one line per interval), so it is a fake one, moved by hand.
  it('logs the first error of a burst, holds back the rest, and says how many on the next interval’s line', () => {
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-01-01T00:00:00Z') });
    const lines: [object, string][] = [];
    const onError = throttledErrorLog(
      { warn: (fields, message) => lines.push([fields, message]) },
      'redis',
      60_000,
    );
    for (let i = 0; i < 50; i++) onError(new Error('connect ECONNREFUSED'));
    expect(lines).toEqual([[{ err: 'connect ECONNREFUSED' }, 'redis error']]);

    vi.advanceTimersByTime(59_999);
    onError(new Error('still down'));
    expect(lines).toHaveLength(1);

    vi.advanceTimersByTime(1);
    onError(new Error('connect ETIMEDOUT'));
    expect(lines).toEqual([
      [{ err: 'connect ECONNREFUSED' }, 'redis error'],
      [{ err: 'connect ETIMEDOUT', suppressed: 50 }, 'redis error'],
    ]);

    // The count starts over with each line; a quiet interval logs the next error without one.
    onError(new Error('held'));
    vi.advanceTimersByTime(60_000);
    onError(new Error('after one held back'));
    vi.advanceTimersByTime(60_000);
    onError(new Error('after a quiet interval'));
    expect(lines.slice(2)).toEqual([
      [{ err: 'after one held back', suppressed: 1 }, 'redis error'],
      [{ err: 'after a quiet interval' }, 'redis error'],
    ]);
  });
});
