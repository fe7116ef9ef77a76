import { setTimeout as sleep } from 'node:timers/promises';

export interface PollOptions {
  /** Absolute time (Date.now() scale) after which polling gives up. */
  deadline: number;
  signal?: AbortSignal;
  /** First wait between checks; doubles up to maxIntervalMs. Short at first so a fast start is seen fast. */
  initialIntervalMs?: number;
  maxIntervalMs?: number;
}

/**
 * Calls `check` until it returns a value other than undefined, or the deadline passes (returns
 * undefined), or the signal aborts (throws the abort reason). The one poll loop: libs/sandbox
 * waits on processes, containers and pods with it, libs/test-support's helpers and benchmarks
 * through test-support's `pollUntil` (which names what timed out). In a package of its own, with
 * no dependency, because test-support (a dev dependency of every lib) can import no other lib.
 */
export async function pollUntil<T>(
  check: () => Promise<T | undefined>,
  options: PollOptions,
): Promise<T | undefined> {
  let interval = options.initialIntervalMs ?? 10;
  const maxInterval = options.maxIntervalMs ?? 200;
  for (;;) {
    options.signal?.throwIfAborted();
    const value = await check();
    if (value !== undefined) return value;
    const remaining = options.deadline - Date.now();
    if (remaining <= 0) return undefined;
    try {
      await sleep(Math.min(interval, remaining), undefined, { signal: options.signal });
    } catch {
      options.signal?.throwIfAborted();
    }
    interval = Math.min(interval * 2, maxInterval);
  }
}
