import {
  createKeySpace,
  createRedisFromEnv,
  DispatchKeys,
  installationOf,
  JobStore,
  QueueNames,
  SandboxAcl,
  SlotLeases,
  warnAboutRedis,
} from '@sandstream/bus';
import { createBackend } from '@sandstream/sandbox';
import {
  GracefulShutdown,
  loadEnvConfig,
  ProgressWatchdog,
  startHealthServer,
  throttledErrorLog,
} from '@sandstream/service-kit';
import { createLogger, createSandstreamMetrics, initTelemetry, withJobSpan } from '@sandstream/telemetry';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { createDestroyProcessor } from './destroy-sandbox.js';
import { LeaseKeeper } from './lease-keeper.js';
import { PodLifecycleEnvSchema } from './pod-lifecycle-config.js';
import { SandboxUserRestorer } from './sandbox-user-restorer.js';
import { failExhaustedStart } from './start-failure.js';
import { createStartProcessor } from './start-sandbox.js';

const logger = createLogger({ service: 'pod-lifecycle' });

async function main(): Promise<void> {
  const env = loadEnvConfig('pod-lifecycle', PodLifecycleEnvSchema);
  const telemetry = await initTelemetry({ serviceName: 'pod-lifecycle' });
  const metrics = createSandstreamMetrics();
  const keys = createKeySpace(env.SANDSTREAM_NAMESPACE);
  const dispatchKeys = new DispatchKeys(keys, env.COMPLETION_SHARDS);
  const redis = createRedisFromEnv(env, 'producer', 'pod-lifecycle');
  warnAboutRedis(redis, (message) => logger.warn(message));
  const createRedisConn = createRedisFromEnv(env, 'worker', 'pod-lifecycle-create');
  const destroyRedisConn = createRedisFromEnv(env, 'worker', 'pod-lifecycle-destroy');
  const prefix = keys.bullPrefix;
  // Connection errors surface as rejected commands; these only keep ioredis from printing each.
  for (const client of [redis, createRedisConn, destroyRedisConn])
    client.on('error', throttledErrorLog(logger, 'redis'));

  const installation = installationOf(env);
  const { backend, detection } = await createBackend({ redis: redis as Redis });
  logger.info({ backend: detection.kind, why: detection.reason }, 'sandbox backend selected');

  let acl: SandboxAcl | null = null;
  if (env.SANDBOX_ACL !== 'off') {
    const candidate = new SandboxAcl(redis, keys);
    if (await candidate.supported()) acl = candidate;
    else if (env.SANDBOX_ACL === 'on')
      throw new Error('SANDBOX_ACL=on but this Redis does not accept ACL commands');
    else logger.warn('Redis does not accept ACL commands: sandboxes share the service credentials');
  }

  const store = new JobStore({ redis, keys });
  const leases = new SlotLeases({
    redis,
    keys,
    // Limits are the scheduler's business; pod-lifecycle only renews and releases.
    globalLimit: Number.MAX_SAFE_INTEGER,
    tenantLimit: Number.MAX_SAFE_INTEGER,
    leaseMs: env.LEASE_SECONDS * 1000,
  });
  const dispatchQueue = new Queue(QueueNames.dispatch, { connection: redis, prefix });
  const destroyQueue = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix });
  const start = createStartProcessor({
    store,
    leases,
    redis,
    keys,
    dispatchKeys,
    backend,
    acl,
    agentRedisUrl: env.AGENT_REDIS_URL ?? env.REDIS_URL,
    ...agentTelemetryEnv(env.AGENT_OTEL_EXPORTER_OTLP_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT),
    dispatchQueue,
    destroyQueue,
    logger,
    installation,
    onStarted: (seconds, kind) => {
      metrics.sandboxStartSeconds.record(seconds, { backend: kind });
      metrics.activeSandboxes.add(1, { backend: kind });
    },
  });
  const destroy = createDestroyProcessor({
    store,
    leases,
    redis,
    keys,
    backend,
    acl,
    graceMs: env.DESTROY_GRACE_SECONDS * 1000,
    logger,
    onDestroyed: (kind) => metrics.activeSandboxes.add(-1, { backend: kind }),
  });
  const createWorker = new Worker(
    QueueNames.sandboxCreate,
    (job) =>
      withJobSpan(
        'pod-lifecycle.start',
        { traceContext: job.data?.traceContext, attempt: job.attemptsMade + 1 },
        () => start(job),
      ),
    { connection: createRedisConn, prefix, concurrency: env.POD_LIFECYCLE_CONCURRENCY },
  );
  const destroyWorker = new Worker(
    QueueNames.sandboxDestroy,
    (job) =>
      withJobSpan(
        'pod-lifecycle.destroy',
        { traceContext: job.data?.traceContext, attempt: job.attemptsMade + 1 },
        () => destroy(job),
      ),
    { connection: destroyRedisConn, prefix, concurrency: env.POD_LIFECYCLE_DESTROY_CONCURRENCY },
  );
  for (const [name, worker] of [
    ['sandbox-create', createWorker],
    ['sandbox-destroy', destroyWorker],
  ] as const) {
    worker.on('failed', (job, err) =>
      logger.error({ queue: name, bullJobId: job?.id, err: err.message }, 'job failed'),
    );
    worker.on('error', throttledErrorLog(logger, `${name} worker`));
  }
  createWorker.on('failed', (job, err) => {
    failExhaustedStart({ store, destroyQueue, logger }, job, err).catch((e: Error) =>
      logger.error({ bullJobId: job?.id, err: e.message }, 'could not end a job whose start gave up'),
    );
  });
  // /readyz fails a loop that stopped making progress.
  const watchdog = new ProgressWatchdog();
  const renewEveryMs = (env.LEASE_SECONDS * 1000) / 3;
  const keeper = new LeaseKeeper({
    leases,
    store,
    logger,
    intervalMs: renewEveryMs,
    onProgress: watchdog.track('lease-keeper', Math.max(renewEveryMs * 5, 20_000)),
  });
  keeper.start();
  const restorer = acl
    ? new SandboxUserRestorer({
        redis,
        keys,
        acl,
        logger,
        intervalMs: env.SANDBOX_ACL_RESTORE_SECONDS * 1000,
        onProgress: watchdog.track(
          'sandbox-user-restore',
          Math.max(env.SANDBOX_ACL_RESTORE_SECONDS * 5000, 20_000),
        ),
      })
    : undefined;
  restorer?.start();
  for (const queue of [dispatchQueue, destroyQueue]) {
    queue.on('error', throttledErrorLog(logger, `${queue.name} queue`));
  }

  const health = await startHealthServer({
    port: env.HEALTH_PORT,
    checks: {
      redis: async () => (await redis.ping()) === 'PONG',
      workers: async () => createWorker.isRunning() && destroyWorker.isRunning(),
      ...watchdog.checks(),
    },
  });
  const shutdown = new GracefulShutdown({ logger, timeoutMs: 60_000 });
  shutdown.add('stop taking work', async () => health.markDraining());
  // In-flight starts and destroys finish; what is left stays queued for another replica.
  shutdown.add('workers', async () => {
    await Promise.all([createWorker.close(), destroyWorker.close()]);
  });
  shutdown.add('lease keeper', () => keeper.stop());
  if (restorer) shutdown.add('sandbox user restore', () => restorer.stop());
  shutdown.add('queues', async () => {
    await Promise.all([dispatchQueue.close(), destroyQueue.close()]);
  });
  shutdown.add('backend', () => backend.close());
  shutdown.add('redis', async () => {
    await Promise.all([redis.quit(), createRedisConn.quit(), destroyRedisConn.quit()]);
  });
  shutdown.add('health server', () => health.close());
  shutdown.add('telemetry', () => telemetry.shutdown());
  logger.info(
    { healthPort: health.port, acl: acl !== null, namespace: keys.namespace, installation },
    'pod-lifecycle started',
  );
}

main().catch((err) => {
  logger.fatal({ err: err instanceof Error ? err.message : String(err) }, 'pod-lifecycle failed to start');
  logger.flush();
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 100).unref();
});

/** The agent's step spans go where this service's spans go, unless told otherwise. */
function agentTelemetryEnv(endpoint: string | undefined): { agentEnv?: Record<string, string> } {
  return endpoint ? { agentEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } } : {};
}
