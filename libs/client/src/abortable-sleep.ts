/** Resolves after `ms`, or at once when `signal` aborts (never rejects: the caller checks the signal). */
export function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** How long a follower waits before its next try after `failures` failed ones: 200 ms doubling to 2 s. */
export function followBackoffMs(failures: number): number {
  return Math.min(100 * 2 ** Math.min(failures, 5), 2000);
}
