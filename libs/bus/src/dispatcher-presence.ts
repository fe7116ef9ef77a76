import type { DispatchKeys } from './dispatch-keys.js';
import type { RedisClient } from './redis-connection.js';

/** Entries older than this are pruned by the writers (a dispatcher gone for an hour is long gone). */
const PRUNE_AFTER_MS = 3_600_000;

/**
 * Which step-dispatchers are alive: each instance stamps its name with the time on every round of
 * its heartbeat monitor (a ZSET scored by epoch ms). The rule it serves (docs/services.md, "Who
 * rescues a job"): a running job whose agent is gone is the dispatcher's to end; the reaper steps
 * in only when no dispatcher has stamped for a while, so the two never race for the same job.
 */
export class DispatcherPresence {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: DispatchKeys,
  ) {}

  async stamp(instance: string, now = Date.now()): Promise<void> {
    const key = this.keys.dispatchersAlive();
    await Promise.all([
      this.redis.zadd(key, now, instance),
      this.redis.zremrangebyscore(key, '-inf', now - PRUNE_AFTER_MS),
    ]);
  }

  /** True when some dispatcher stamped within `withinMs`. */
  async anyAlive(withinMs: number, now = Date.now()): Promise<boolean> {
    const recent = await this.redis.zrangebyscore(
      this.keys.dispatchersAlive(),
      now - withinMs,
      '+inf',
      'LIMIT',
      0,
      1,
    );
    return recent.length > 0;
  }
}
