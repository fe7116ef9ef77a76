/**
 * Polls `probe` until it returns a truthy value and resolves with it; rejects naming `what` after
 * `timeoutMs`. Tests use vitest's `vi.waitFor` / `vi.waitUntil` / `expect.poll` instead: this is
 * for code that also runs outside vitest (the helpers here, benchmarks). Production code polls with
 * libs/sandbox's pollUntil (deadline, abort signal, backoff): this package, a dev dependency of
 * every lib, imports none of them.
 */
export async function pollUntil<T>(
  what: string,
  probe: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  options: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const { timeoutMs = 10_000, intervalMs = 50 } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
