import { describe, expect, it } from 'vitest';
import { throttledErrorLog } from './throttled-error-log.js';

describe('throttledErrorLog', () => {
  it('logs the first error of a burst and holds back the rest', () => {
    const lines: unknown[] = [];
    const onError = throttledErrorLog({ warn: (fields) => lines.push(fields) }, 'redis', 60_000);
    for (let i = 0; i < 50; i++) onError(new Error('connect ECONNREFUSED'));
    expect(lines).toEqual([{ err: 'connect ECONNREFUSED' }]);
  });
});
