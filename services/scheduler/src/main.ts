import {
  BuiltTemplates,
  JobStore,
  QueueNames,
  SlotAdmission,
  WORKER_DRAIN_DELAY_SECONDS,
} from '@sandstream/bus';
import { TemplateRegistry } from '@sandstream/sandbox';
import { ProgressWatchdog, runService, throttledErrorLog } from '@sandstream/service-kit';
import { createSandstreamMetrics, withJobSpan } from '@sandstream/telemetry';
import { Queue, Worker } from 'bullmq';
import { failExhaustedAdmission } from './admission-failure.js';
import { CapacityWaker } from './capacity-waker.js';
import { createScheduleProcessor } from './schedule-job.js';
import { SchedulerEnvSchema, tenantSlotLimit } from './scheduler-config.js';
import { TemplateResolver } from './template-resolver.js';

runService({
  name: 'scheduler',
  env: SchedulerEnvSchema,
  async start({ env, logger, keys, redis, connect, onShutdown }) {
    const workerRedis = connect('worker', 'scheduler-worker');
    const blockingRedis = connect('worker', 'scheduler-waker');
    const prefix = keys.bullPrefix;

    const store = new JobStore({ redis, keys });
    const leases = new SlotAdmission({
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
      // Built templates (sandstream template build) are read from Redis at each resolution.
      resolver: new TemplateResolver(templates, new BuiltTemplates(redis, keys)),
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
      {
        connection: workerRedis,
        prefix,
        concurrency: env.SCHEDULER_CONCURRENCY,
        drainDelay: WORKER_DRAIN_DELAY_SECONDS,
      },
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
      admission: leases,
      store,
      jobsQueue,
      logger,
      onProgress: watchdog.track('capacity-waker', 20_000),
    });
    waker.start();

    onShutdown('capacity waker', () => waker.stop());
    // close() waits for in-flight admissions; unfinished BullMQ jobs stay in Redis for another replica.
    onShutdown('jobs worker', () => worker.close());
    onShutdown('queues', async () => {
      await Promise.all([jobsQueue.close(), createQueue.close()]);
    });
    onShutdown('templates', async () => templates?.close());
    return {
      checks: { worker: async () => worker.isRunning(), ...watchdog.checks() },
      info: { globalSlots: env.SCHEDULER_GLOBAL_SLOTS, tenantSlots: env.SCHEDULER_TENANT_SLOTS },
    };
  },
});
