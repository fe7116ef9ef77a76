/**
 * An 'error' listener for Redis clients, BullMQ workers and queues that logs at most one line per
 * `intervalMs` (with how many it held back). While Redis is down they emit an error on every
 * reconnect attempt; the failures that matter surface anyway as rejected commands in the loops,
 * which log once per outage. A listener must exist all the same: without one ioredis prints
 * "[ioredis] Unhandled error event" with a stack trace for each attempt.
 */
export function throttledErrorLog(
  logger: { warn(fields: object, message: string): void },
  what: string,
  intervalMs = 30_000,
): (err: Error) => void {
  let last = 0;
  let held = 0;
  return (err: Error) => {
    const now = Date.now();
    if (now - last < intervalMs) {
      held++;
      return;
    }
    logger.warn({ err: err.message, ...(held > 0 ? { suppressed: held } : {}) }, `${what} error`);
    last = now;
    held = 0;
  };
}
