import { type RawConnectionOptions, RawListConnection } from '@sandstream/wire';
import type { Cluster, Redis } from 'ioredis';

function optionsOf(node: Redis): RawConnectionOptions {
  const o = node.options;
  return {
    host: o.host ?? '127.0.0.1',
    port: o.port ?? 6379,
    // ioredis leaves what was not given as null or empty.
    path: o.path || undefined,
    username: o.username || undefined,
    password: o.password || undefined,
    db: o.db || undefined,
    tls: o.tls || undefined,
    connectTimeoutMs: o.connectTimeout || undefined,
  };
}

/**
 * A RawListConnection for one transfer list, as the client's own Redis user: to the client's
 * node, or on a Cluster to the master that holds the list's slot (the key is hash-tagged by its
 * sandbox, so it never moves during a transfer unless the cluster is resharded under it).
 */
export async function openTransferConnection(
  redis: Redis | Cluster,
  key: string,
): Promise<RawListConnection> {
  const cluster = redis as Cluster;
  if (!cluster.isCluster) return RawListConnection.open(optionsOf(redis as Redis));
  const slot = Number(await cluster.call('CLUSTER', 'KEYSLOT', key));
  const owner = cluster.slots[slot]?.[0];
  const node = cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === owner);
  if (!node) throw new Error(`no Redis Cluster master holds the transfer's slot ${slot}`);
  return RawListConnection.open(optionsOf(node));
}
