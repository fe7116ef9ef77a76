import { execFileSync } from 'node:child_process';
import { Cluster } from 'ioredis';
import { type OwnRedis, startOwnRedis } from './redis-server.js';

export interface OwnCluster {
  nodes: OwnRedis[];
  /** host:port,host:port,… as REDIS_CLUSTER_NODES takes it. */
  seeds: string;
  stop: () => Promise<void>;
}

/** Three masters from plain `redis-server --cluster-enabled yes`, joined with `redis-cli --cluster create`. */
export async function startOwnCluster(masters = 3): Promise<OwnCluster> {
  const nodes: OwnRedis[] = [];
  for (let i = 0; i < masters; i++) {
    nodes.push(
      await startOwnRedis([
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        '5000',
      ]),
    );
  }
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  execFileSync(
    'redis-cli',
    ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'],
    {
      stdio: 'ignore',
      timeout: 60_000,
    },
  );
  // Wait until every node agrees the cluster is usable.
  const deadline = Date.now() + 30_000;
  for (const node of nodes) {
    for (;;) {
      const info = execFileSync('redis-cli', ['-p', String(node.port), 'cluster', 'info'], {
        encoding: 'utf8',
      });
      if (info.includes('cluster_state:ok')) break;
      if (Date.now() > deadline) throw new Error(`cluster not ok on ${node.port}:\n${info}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    nodes,
    seeds: addresses.join(','),
    stop: async () => {
      await Promise.all(nodes.map((n) => n.stop()));
    },
  };
}

export async function connectCluster(cluster: OwnCluster): Promise<Cluster> {
  const client = new Cluster(
    cluster.nodes.map((n) => ({ host: '127.0.0.1', port: n.port })),
    { redisOptions: { maxRetriesPerRequest: 3 } },
  );
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
  });
  return client;
}
