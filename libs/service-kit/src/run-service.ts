import {
  type ConnectionRole,
  checkRedisAtStart,
  createKeySpace,
  createRedis,
  type KeySpace,
  type RedisClient,
  waitForRedis,
} from '@sandstream/bus';
import { createLogger, initTelemetry, type Logger } from '@sandstream/telemetry';
import type { RedisOptions } from 'ioredis';
import type { z } from 'zod';
import { loadEnvConfig } from './env-config.js';
import { GracefulShutdown } from './graceful-shutdown.js';
import { type HealthServer, type ReadinessCheck, startHealthServer } from './health-server.js';
import { closeRedis, dropWhenOffline } from './redis-shutdown.js';
import type { ServiceEnv } from './service-env.js';
import { throttledErrorLog } from './throttled-error-log.js';

/** What runService hands a service's start function. */
export interface ServiceContext<E extends ServiceEnv> {
  env: E;
  logger: Logger;
  keys: KeySpace;
  /** The producer connection (scripts, writes, queues); closed by runService. */
  redis: RedisClient;
  /**
   * A new connection of the given role (BullMQ workers, blocking reads); closed by runService.
   * Like the producer it has a throttled error listener (no ioredis trace per reconnect attempt).
   */
  connect(role: ConnectionRole, connectionName: string): RedisClient;
  /** Aborted when shutdown begins: background loops watch it to stop. */
  signal: AbortSignal;
  /**
   * A shutdown step of the service's own (workers, loops, queues, backend), run in the order
   * added, after readiness turned 503 and before the connections, the health server and
   * telemetry close.
   */
  onShutdown(name: string, run: () => Promise<void>): void;
}

export interface StartedService {
  /** Readiness checks besides Redis' ping (workers running, last pass ok, …). */
  checks?: Record<string, ReadinessCheck>;
  /**
   * Liveness checks (/healthz): false only for a dependency that cannot recover without a
   * restart. One that is merely down belongs in `checks`.
   */
  liveness?: Record<string, ReadinessCheck>;
  /** Logged with the `<name> started` line. */
  info?: Record<string, unknown>;
}

export interface ServiceDefinition<S extends z.ZodType<ServiceEnv>> {
  /** `scheduler`, `pod-lifecycle`, …: the logger's service, the telemetry service name, log lines. */
  name: string;
  env: S;
  /** Options of the producer connection (the dispatcher auto-pipelines and names it per instance). */
  redis?: { connectionName?: (env: z.output<S>) => string; overrides?: RedisOptions };
  /** Wait until Redis answers before starting (else the service starts and its clients reconnect). */
  waitForRedis?: boolean;
  /** Budget of the whole shutdown (default 30 s). */
  shutdownTimeoutMs?: number;
  start(context: ServiceContext<z.output<S>>): Promise<StartedService>;
}

/**
 * The one way a service process starts: environment validated (every bad variable named, exit
 * 1), telemetry, logger, Redis connections (each with a throttled error listener), the check of
 * the Redis itself (a Redis that would lose every job on restart is refused, others warned about),
 * the service's own start, the health server, and an ordered graceful shutdown on SIGTERM /
 * SIGINT: readiness 503 → the service's steps → Redis → health server → telemetry. A failure
 * before the service runs is logged as `fatal` and exits 1.
 */
export function runService<S extends z.ZodType<ServiceEnv>>(definition: ServiceDefinition<S>): void {
  const logger = createLogger({ service: definition.name });
  start(definition, logger).catch((err: unknown) => {
    logger.fatal(
      { err: err instanceof Error ? err.message : String(err) },
      `${definition.name} failed to start`,
    );
    logger.flush();
    process.exitCode = 1;
    setTimeout(() => process.exit(1), 100).unref();
  });
}

async function start<S extends z.ZodType<ServiceEnv>>(
  definition: ServiceDefinition<S>,
  logger: Logger,
): Promise<void> {
  const env = loadEnvConfig(definition.name, definition.env);
  const telemetry = await initTelemetry({ serviceName: definition.name });
  const keys = createKeySpace(env.SANDSTREAM_NAMESPACE);
  const connections: RedisClient[] = [];
  const connect = (role: ConnectionRole, connectionName: string, overrides?: RedisOptions) => {
    const client = createRedis({
      url: env.REDIS_URL,
      clusterNodes: env.REDIS_CLUSTER_NODES,
      role,
      connectionName,
      ...(overrides ? { overrides } : {}),
    });
    // Connection errors surface as rejected commands; this only keeps ioredis from printing each.
    client.on('error', throttledErrorLog(logger, 'redis'));
    connections.push(client);
    return client;
  };
  const redis = connect(
    'producer',
    definition.redis?.connectionName?.(env) ?? definition.name,
    definition.redis?.overrides,
  );
  if (definition.waitForRedis) await waitForRedis(redis);
  await checkRedis(redis, env, logger);

  const shutdown = new GracefulShutdown({
    logger,
    ...(definition.shutdownTimeoutMs ? { timeoutMs: definition.shutdownTimeoutMs } : {}),
  });
  // A Redis that is down when the shutdown begins (or goes down during it) is not waited for.
  shutdown.signal.addEventListener('abort', () => connections.forEach(dropWhenOffline), { once: true });
  let health: HealthServer | undefined;
  shutdown.add('stop taking work', async () => health?.markDraining());
  // While Redis is still open: the last collection reads gauges from it (see flushMetrics).
  shutdown.add('metrics', () => telemetry.flushMetrics());
  const started = await definition.start({
    env,
    logger,
    keys,
    redis,
    connect: (role, connectionName) => connect(role, connectionName),
    signal: shutdown.signal,
    onShutdown: (name, run) => shutdown.add(name, run),
  });
  health = await startHealthServer({
    port: env.HEALTH_PORT,
    host: env.HEALTH_HOST,
    checks: { redis: async () => (await redis.ping()) === 'PONG', ...started.checks },
    ...(started.liveness ? { liveness: started.liveness } : {}),
  });
  shutdown.add('redis', async () => {
    await Promise.all(connections.map((c) => closeRedis(c)));
  });
  const server = health;
  shutdown.add('health server', () => server.close());
  shutdown.add('telemetry', () => telemetry.shutdown());
  logger.info(
    { healthPort: health.port, namespace: keys.namespace, ...started.info },
    `${definition.name} started`,
  );
}

/** How long the start waits for Redis to answer the check before starting without it. */
const REDIS_CHECK_WAIT_MS = 10_000;

/**
 * Refuses (throws, so the service exits 1 before it takes work) a Redis that would drop every
 * job on its next restart (redis-safety.ts), and logs the warnings. A Redis that is down at start
 * is checked when it first answers; refused then, the process exits 1 at once.
 */
async function checkRedis(redis: RedisClient, env: ServiceEnv, logger: Logger): Promise<void> {
  const check = () => checkRedisAtStart(redis, { allowUnsafeAcl: env.SANDSTREAM_ALLOW_UNSAFE_REDIS_ACL });
  const report = (result: Awaited<ReturnType<typeof check>>) => {
    for (const message of result.warnings) logger.warn(message);
    return result.refusal;
  };
  const ready = await waitForRedis(redis, REDIS_CHECK_WAIT_MS).then(
    () => true,
    () => false,
  );
  if (ready) {
    const refusal = report(await check());
    if (refusal) throw new Error(refusal);
    return;
  }
  logger.warn('Redis does not answer yet: it is checked (AOF, version, ACL) when it does');
  redis.once('ready', () => {
    check().then(
      (result) => {
        const refusal = report(result);
        if (!refusal) return;
        logger.fatal({ err: refusal }, 'refusing this Redis');
        logger.flush();
        process.exit(1);
      },
      (err: unknown) => logger.warn({ err: String(err) }, 'could not check Redis'),
    );
  });
}
