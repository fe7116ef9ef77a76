import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

export type PoolClaimOutcome = 'hit' | 'miss';

/** A pool's warm claims: `hits` found a ready member, `misses` fell back to a cold start. */
export interface PoolClaimCount {
  hits: number;
  misses: number;
}

/**
 * Warm-pool hits and misses kept in Redis, so the API (another process than the pod-lifecycle
 * replicas that claim) can report them and they survive restarts. The OpenTelemetry counters
 * stay as they are; this is the figure a console shows without a metrics backend.
 */
export class PoolClaimCounts {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
  ) {}

  async record(pool: string, outcome: PoolClaimOutcome): Promise<void> {
    await this.redis.hincrby(this.keys.pools.claimCounts, `${pool}:${outcome}`, 1);
  }

  /** Counts for the named pools; a pool never claimed from gets zeros. */
  async of(pools: readonly string[]): Promise<Map<string, PoolClaimCount>> {
    const out = new Map<string, PoolClaimCount>();
    if (pools.length === 0) return out;
    const fields = pools.flatMap((p) => [`${p}:hit`, `${p}:miss`]);
    const values = await this.redis.hmget(this.keys.pools.claimCounts, ...fields);
    pools.forEach((pool, i) => {
      out.set(pool, { hits: Number(values[2 * i] ?? 0), misses: Number(values[2 * i + 1] ?? 0) });
    });
    return out;
  }
}
