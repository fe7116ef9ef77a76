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

/**
 * The database a client works in: its URL's `/db`, 0 on a Cluster (which has no other). Where
 * the services keep their keys, so where a sandbox's own keys belong.
 */
export function homeDatabase(redis: RedisClient): number {
  return (redis as Cluster).isCluster ? 0 : ((redis as Redis).options.db ?? 0);
}

/** The databases of one node that hold keys, from INFO keyspace (`db3:keys=…`): one O(1) call. */
export async function databasesWithKeys(node: Redis): Promise<number[]> {
  const info = await node.info('keyspace');
  return [...info.matchAll(/^db(\d+):keys=(\d+)/gm)].filter((m) => Number(m[2]) > 0).map((m) => Number(m[1]));
}

/** One batch of scanEveryDatabase: `client` works in `db` (route per-key commands for `keys` through it). */
export interface DatabaseBatch {
  db: number;
  /** True for the services' own database (homeDatabase). */
  home: boolean;
  client: RedisClient;
  keys: string[];
}

/**
 * scanKeys in every database that holds keys, not only the client's own: a sandbox user that
 * may SELECT (an ACL from an older deployment) writes its pattern into any of them. The home
 * database goes first, through `redis` itself; another one through a connection of its own that
 * SELECTs it (awaited: a refused SELECT throws rather than scan the home database by mistake),
 * closed after its walk, so no shared connection ever changes database under its other callers.
 * A Cluster has database 0 only.
 */
export async function* scanEveryDatabase(
  redis: RedisClient,
  options: ScanOptions,
): AsyncGenerator<DatabaseBatch> {
  const home = homeDatabase(redis);
  for await (const keys of scanKeys(redis, options)) yield { db: home, home: true, client: redis, keys };
  if ((redis as Cluster).isCluster) return;
  const node = redis as Redis;
  for (const db of await databasesWithKeys(node)) {
    if (db === home) continue;
    if (options.signal?.aborted) return;
    const client = node.duplicate({ lazyConnect: true });
    try {
      await client.select(db);
      for await (const keys of scanKeys(client, options)) yield { db, home: false, client, keys };
    } finally {
      client.disconnect();
    }
  }
}
