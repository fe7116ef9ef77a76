import { pollUntil as poll } from '@sandstream/poll';

/**
 * Polls `probe` until it returns a truthy value and resolves with it; rejects naming `what` after
 * `timeoutMs`. Tests use vitest's `vi.waitFor` / `vi.waitUntil` / `expect.poll` instead: this is
 * for code that also runs outside vitest (the helpers here, benchmarks). The loop is
 * @sandstream/poll's, the one production code polls with; this adds the name and the throw.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const { timeoutMs = 10_000, intervalMs = 50 } = options;
  const value = await poll(async () => (await probe()) || undefined, {
    deadline: Date.now() + timeoutMs,
    initialIntervalMs: intervalMs,
    maxIntervalMs: intervalMs,
  });
  if (value === undefined) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
  return value;
}
