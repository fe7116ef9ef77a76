import { describe, expect, it } from 'vitest';
import { pollUntil } from './poll-until.js';

describe('pollUntil', () => {
  it('returns the first value other than undefined, falsy ones included', async () => {
    let n = 0;
    expect(
      await pollUntil(async () => (++n >= 3 ? 0 : undefined), {
        deadline: Date.now() + 10_000,
        initialIntervalMs: 1,
      }),
    ).toBe(0);
    expect(n).toBe(3);
  });

  it('gives up at the deadline with undefined, having checked once more', async () => {
    let checks = 0;
    const value = await pollUntil(
      async () => {
        checks++;
        return undefined;
      },
      { deadline: Date.now() + 50, initialIntervalMs: 5, maxIntervalMs: 10 },
    );
    expect(value).toBeUndefined();
    expect(checks).toBeGreaterThan(1);
  });

  it('throws the reason of an abort, before or while it waits', async () => {
    const before = AbortSignal.abort(new Error('stopped before'));
    await expect(
      pollUntil(async () => undefined, { deadline: Date.now() + 10_000, signal: before }),
    ).rejects.toThrow('stopped before');
    const controller = new AbortController();
    const waiting = pollUntil(
      async () => {
        controller.abort(new Error('stopped while waiting'));
        return undefined;
      },
      { deadline: Date.now() + 60_000, signal: controller.signal, initialIntervalMs: 30_000 },
    );
    await expect(waiting).rejects.toThrow('stopped while waiting');
  });
});
