import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Cluster, Redis } from 'ioredis';
import { pollUntil } from './poll.js';
import { RedisServer } from './redis-server.js';

const run = promisify(execFile);

/**
 * A throwaway Redis Cluster of plain `redis-server --cluster-enabled yes` masters on free ports
 * (no replicas, no persistence), joined with `redis-cli --cluster create`, so cluster behaviour —
 * CROSSSLOT refusals, slot routing, per-node ACLs — is tested for real rather than assumed.
 */
export class RedisCluster {
  private constructor(readonly servers: RedisServer[]) {}

  static async start(masters = 3): Promise<RedisCluster> {
    const cluster = new RedisCluster([]);
    try {
      for (let i = 0; i < masters; i++) {
        cluster.servers.push(
          await RedisServer.start({
            args: [
              '--cluster-enabled',
              'yes',
              '--cluster-config-file',
              'nodes.conf',
              '--cluster-node-timeout',
              '5000',
            ],
          }),
        );
      }
      await run(
        'redis-cli',
        ['--cluster', 'create', ...cluster.addresses, '--cluster-replicas', '0', '--cluster-yes'],
        {
          timeout: 60_000,
        },
      );
      await cluster.waitUntilOk();
      return cluster;
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  /** Every node must agree the cluster is usable before a client is pointed at it. */
  private async waitUntilOk(timeoutMs = 30_000): Promise<void> {
    for (const server of this.servers) {
      const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
      try {
        await pollUntil(
          `cluster_state:ok on ${server.port}`,
          async () => String(await client.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
          { timeoutMs, intervalMs: 100 },
        );
      } finally {
        client.disconnect();
      }
    }
  }

  get ports(): number[] {
    return this.servers.map((s) => s.port);
  }

  /** Seed nodes as ioredis' Cluster takes them. */
  get nodes(): { host: string; port: number }[] {
    return this.servers.map((s) => ({ host: s.host, port: s.port }));
  }

  private get addresses(): string[] {
    return this.servers.map((s) => `${s.host}:${s.port}`);
  }

  /** host:port,host:port,… as REDIS_CLUSTER_NODES takes it. */
  get seeds(): string {
    return this.addresses.join(',');
  }

  /** A connected ioredis Cluster client; the caller disconnects it. */
  async connect(): Promise<Cluster> {
    const client = new Cluster(this.nodes, { redisOptions: { maxRetriesPerRequest: 3 } });
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      client.once('error', reject);
    });
    return client;
  }

  async stop(): Promise<void> {
    await Promise.all(this.servers.map((s) => s.stop()));
  }
}

export function startRedisCluster(masters = 3): Promise<RedisCluster> {
  return RedisCluster.start(masters);
}
