import {
  createKeySpace,
  createRedisFromEnv,
  JobStore,
  QueueNames,
  SlotLeases,
  warnAboutRedis,
} from '@sandstream/bus';
import { TemplateRegistry } from '@sandstream/sandbox';
import {
  GracefulShutdown,
  loadEnvConfig,
  ProgressWatchdog,
  startHealthServer,
  throttledErrorLog,
} from '@sandstream/service-kit';
import { createLogger, createSandstreamMetrics, initTelemetry, withJobSpan } from '@sandstream/telemetry';
import { Queue, Worker } from 'bullmq';
import { failExhaustedAdmission } from './admission-failure.js';
import { CapacityWaker } from './capacity-waker.js';
import { createScheduleProcessor } from './schedule-job.js';
import { SchedulerEnvSchema, tenantSlotLimit } from './scheduler-config.js';
import { TemplateResolver } from './template-resolver.js';

const logger = createLogger({ service: 'scheduler' });

async function main(): Promise<void> {
  const env = loadEnvConfig('scheduler', SchedulerEnvSchema);
  const telemetry = await initTelemetry({ serviceName: 'scheduler' });
  const keys = createKeySpace(env.SANDSTREAM_NAMESPACE);
  const redis = createRedisFromEnv(env, 'producer', 'scheduler');
  warnAboutRedis(redis, (message) => logger.warn(message));
  const workerRedis = createRedisFromEnv(env, 'worker', 'scheduler-worker');
  const blockingRedis = createRedisFromEnv(env, 'worker', 'scheduler-waker');
  const prefix = keys.bullPrefix;
  // Connection errors surface as rejected commands; these only keep ioredis from printing each.
  for (const client of [redis, workerRedis, blockingRedis])
    client.on('error', throttledErrorLog(logger, 'redis'));

  const store = new JobStore({ redis, keys });
  const leases = new SlotLeases({
    redis,
    keys,
    globalLimit: env.SCHEDULER_GLOBAL_SLOTS,
    tenantLimit: tenantSlotLimit(env),
    leaseMs: env.LEASE_SECONDS * 1000,
  });
  const jobsQueue = new Queue(QueueNames.jobs, { connection: redis, prefix });
  const createQueue = new Queue(QueueNames.sandboxCreate, { connection: redis, prefix });
  const metrics = createSandstreamMetrics();
  // Read from Redis only when a metrics reader collects: no polling loop to stop on SIGTERM.
  metrics.observeQueueDepth(async () => {
    const samples = [];
    for (const [queue, q] of [
      [QueueNames.jobs, jobsQueue],
      [QueueNames.sandboxCreate, createQueue],
    ] as const) {
      const counts = await q.getJobCounts('waiting', 'prioritized', 'delayed', 'active');
      for (const [state, depth] of Object.entries(counts)) samples.push({ queue, state, depth });
    }
    return samples;
  });
  // Slot holders are bounded by the global limit, so grouping them by tenant stays cheap.
  metrics.observeTenantSlots(async () => {
    const holders = await leases.holders();
    const now = Date.now();
    const records = await Promise.all(
      holders.filter((h) => h.expiresAt > now).map((h) => store.get(h.holder)),
    );
    const perTenant = new Map<string, number>();
    for (const r of records) if (r) perTenant.set(r.tenant, (perTenant.get(r.tenant) ?? 0) + 1);
    return [...perTenant].map(([tenant, inUse]) => ({ tenant, inUse }));
  });
  const templates = env.SANDSTREAM_TEMPLATES_FILE
    ? await TemplateRegistry.open({
        path: env.SANDSTREAM_TEMPLATES_FILE,
        onReload: (event) =>
          event.ok
            ? logger.info({ templates: event.templates }, 'templates reloaded')
            : logger.error(
                { err: event.error.message },
                'templates file invalid; keeping the previous templates',
              ),
      })
    : undefined;
  const processor = createScheduleProcessor({
    store,
    leases,
    redis,
    keys,
    createQueue,
    resolver: new TemplateResolver(templates),
    logger,
    recheckMs: env.SCHEDULER_RECHECK_SECONDS * 1000,
  });
  const worker = new Worker(
    QueueNames.jobs,
    (job, token) => {
      if (job.attemptsMade === 0) {
        metrics.queueWaitSeconds.record((Date.now() - job.timestamp) / 1000, { queue: QueueNames.jobs });
      }
      return withJobSpan(
        'scheduler.admit',
        { traceContext: job.data?.traceContext, attempt: job.attemptsMade + 1 },
        () => processor(job, token),
      );
    },
    { connection: workerRedis, prefix, concurrency: env.SCHEDULER_CONCURRENCY },
  );
  worker.on('failed', (job, err) => {
    logger.error(
      { bullJobId: job?.id, err: err.message, attempt: job?.attemptsMade },
      'admission attempt failed',
    );
    failExhaustedAdmission({ store, leases, logger }, job, err).catch((e: Error) =>
      logger.error({ bullJobId: job?.id, err: e.message }, 'could not end a job whose admission gave up'),
    );
  });
  worker.on('error', throttledErrorLog(logger, 'jobs worker'));
  for (const queue of [jobsQueue, createQueue]) {
    queue.on('error', throttledErrorLog(logger, `${queue.name} queue`));
  }
  // /readyz fails a loop that stopped making progress.
  const watchdog = new ProgressWatchdog();
  const waker = new CapacityWaker({
    blockingRedis,
    redis,
    keys,
    jobsQueue,
    logger,
    onProgress: watchdog.track('capacity-waker', 20_000),
  });
  waker.start();

  const health = await startHealthServer({
    port: env.HEALTH_PORT,
    checks: {
      redis: async () => (await redis.ping()) === 'PONG',
      worker: async () => worker.isRunning(),
      ...watchdog.checks(),
    },
  });
  const shutdown = new GracefulShutdown({ logger });
  shutdown.add('stop taking work', async () => health.markDraining());
  shutdown.add('capacity waker', () => waker.stop());
  // close() waits for in-flight admissions; unfinished BullMQ jobs stay in Redis for another replica.
  shutdown.add('jobs worker', () => worker.close());
  shutdown.add('queues', async () => {
    await Promise.all([jobsQueue.close(), createQueue.close()]);
  });
  shutdown.add('redis', async () => {
    await Promise.all([redis.quit(), workerRedis.quit(), blockingRedis.quit()]);
  });
  shutdown.add('health server', () => health.close());
  shutdown.add('templates', async () => templates?.close());
  shutdown.add('telemetry', () => telemetry.shutdown());
  logger.info(
    {
      healthPort: health.port,
      globalSlots: env.SCHEDULER_GLOBAL_SLOTS,
      tenantSlots: env.SCHEDULER_TENANT_SLOTS,
      namespace: keys.namespace,
    },
    'scheduler started',
  );
}

main().catch((err) => {
  logger.fatal({ err: err instanceof Error ? err.message : String(err) }, 'scheduler failed to start');
  logger.flush();
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 100).unref();
});
