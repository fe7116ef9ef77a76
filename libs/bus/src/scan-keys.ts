import type { Cluster, Redis } from 'ioredis';
import type { RedisClient } from './redis-connection.js';

export interface ScanOptions {
  match: string;
  /** SCAN COUNT: a hint for how much work one call does on the server. */
  count?: number;
  /** Pause between batches so a large key space is walked without hogging Redis. */
  pauseMs?: number;
  signal?: AbortSignal;
}

/** Text as a SCAN pattern that matches it literally (a key prefix may hold `*`, `?`, `[`, `]`). */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** The nodes that hold keys: every master of a Cluster, or the one node. */
export function redisMasters(redis: RedisClient): Redis[] {
  const cluster = redis as Cluster;
  return cluster.isCluster ? cluster.nodes('master') : [redis as Redis];
}

/**
 * Yields batches of keys matching a pattern, with SCAN (never KEYS), on every master of a
 * Cluster. A key may be yielded twice (SCAN's guarantee is "at least once" for keys that live
 * through the walk), so whatever consumes it must be idempotent.
 */
export async function* scanKeys(redis: RedisClient, options: ScanOptions): AsyncGenerator<string[]> {
  for (const node of redisMasters(redis)) {
    let cursor = '0';
    do {
      if (options.signal?.aborted) return;
      const [next, keys] = await node.scan(cursor, 'MATCH', options.match, 'COUNT', options.count ?? 200);
      cursor = next;
      if (keys.length > 0) yield keys;
      if (options.pauseMs && cursor !== '0') await new Promise((r) => setTimeout(r, options.pauseMs));
    } while (cursor !== '0');
  }
}
