import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { z } from 'zod';

/** A single node or a Cluster: BullMQ and every helper in this package accept either. */
export type RedisClient = Redis | Cluster;

/**
 * `worker`: blocking consumers (BullMQ Worker, XREADGROUP BLOCK, BLPOP). BullMQ requires
 * `maxRetriesPerRequest: null` here, so a blocking command survives a reconnect instead of
 * rejecting after a few retries and killing the consumer loop.
 * `producer`: request/response callers (Queue.add, job-store calls, HTTP handlers). A bounded
 * retry count makes a call fail visibly while Redis is down instead of hanging a request forever.
 */
export type ConnectionRole = 'worker' | 'producer';

const clusterNode = z
  .string()
  .regex(/^[^\s:]+:\d{1,5}$/, 'each REDIS_CLUSTER_NODES entry must be host:port')
  .transform((entry) => {
    const at = entry.lastIndexOf(':');
    return { host: entry.slice(0, at), port: Number(entry.slice(at + 1)) };
  });

export const RedisEnvSchema = z.object({
  /** redis://[user:password@]host:port[/db]; credentials here also apply to Cluster nodes. */
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'REDIS_URL must start with redis:// or rediss://')
    .default('redis://127.0.0.1:6379'),
  /** Comma-separated host:port seeds; when set, a Redis Cluster client is created. */
  REDIS_CLUSTER_NODES: z
    .string()
    .optional()
    .transform((v) =>
      v
        ? v
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
        : [],
    )
    .pipe(z.array(clusterNode)),
});
export type RedisEnv = z.output<typeof RedisEnvSchema>;

export interface RedisConnectionOptions {
  url?: string;
  clusterNodes?: { host: string; port: number }[];
  role: ConnectionRole;
  /** Shown by CLIENT LIST, so an operator can tell which service holds a connection. */
  connectionName?: string;
  /** Extra ioredis options, applied last. */
  overrides?: RedisOptions;
}

function roleOptions(role: ConnectionRole): RedisOptions {
  return role === 'worker'
    ? { maxRetriesPerRequest: null, enableReadyCheck: true }
    : { maxRetriesPerRequest: 3, enableReadyCheck: true };
}

function credentialsFrom(url: string): Pick<RedisOptions, 'username' | 'password' | 'tls'> {
  const parsed = new URL(url);
  return {
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(parsed.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}

/** Creates an ioredis client (or Cluster client) with the settings BullMQ recommends for its role. */
export function createRedis(options: RedisConnectionOptions): RedisClient {
  const url = options.url ?? 'redis://127.0.0.1:6379';
  const base: RedisOptions = {
    ...roleOptions(options.role),
    ...(options.connectionName ? { connectionName: options.connectionName } : {}),
    ...options.overrides,
  };
  if (options.clusterNodes && options.clusterNodes.length > 0) {
    return new Cluster(options.clusterNodes, {
      redisOptions: { ...base, ...credentialsFrom(url) },
      // Blocking BullMQ commands must not be retried against another node mid-failover.
      ...(options.role === 'worker' ? { maxRedirections: 16 } : {}),
    });
  }
  return new Redis(url, base);
}

/** Resolves once the client is connected and ready (or rejects after timeoutMs). */
export async function waitForRedis(client: RedisClient, timeoutMs = 10_000): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis not ready after ${timeoutMs} ms (status ${client.status})`));
    }, timeoutMs);
    const onReady = () => {
      cleanup();
      resolve();
    };
    const cleanup = () => {
      clearTimeout(timer);
      client.off('ready', onReady);
    };
    client.on('ready', onReady);
  });
}

/**
 * A connection like `redis` for BullMQ queues, without auto-pipelining. A Queue defines its ~50
 * Lua scripts as commands on the connection it is given, and ioredis copies every defined
 * command onto each pipeline it creates: on an auto-pipelining connection (the HTTP API's) that
 * is one pipeline per event-loop turn, each costing ~30 µs more (measured) than on a connection
 * without them, on every command the process sends. Kept apart, the scripts cost only the queue
 * calls, which are one or two per submit and gain nothing from pipelining.
 */
export function queueConnection(redis: RedisClient): RedisClient {
  const queue =
    redis instanceof Cluster
      ? redis.duplicate([], { enableAutoPipelining: false })
      : redis.duplicate({ enableAutoPipelining: false });
  // Failed calls reject their caller; without a listener ioredis prints each reconnect attempt.
  queue.on('error', () => {});
  return queue;
}
