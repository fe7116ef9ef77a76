#!/usr/bin/env node
import { hostname } from 'node:os';
import {
  createKeySpace,
  createRedis,
  createRedisFromEnv,
  DefaultJobOptions,
  DispatcherPresence,
  DispatchKeys,
  type DispatchPayload,
  DispatchPayloadSchema,
  JobStore,
  QueueNames,
  type SandboxDestroyPayload,
  waitForRedis,
  warnAboutRedis,
} from '@sandstream/bus';
import {
  GracefulShutdown,
  ProgressWatchdog,
  startHealthServer,
  throttledErrorLog,
} from '@sandstream/service-kit';
import { createLogger, createSandstreamMetrics, initTelemetry, withJobSpan } from '@sandstream/telemetry';
import { formatIssues } from '@sandstream/wire';
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import { CompletionConsumer } from './completion-consumer.js';
import { loadConfig } from './config.js';
import { DeadlineSweeper } from './deadline-sweeper.js';
import { HeartbeatMonitor } from './heartbeat-monitor.js';
import { StepDispatcher } from './step-dispatcher.js';

const logger = createLogger({ service: 'step-dispatcher' });

async function main(): Promise<void> {
  const config = loadConfig();
  const telemetry = await initTelemetry({ serviceName: 'step-dispatcher' });
  const keySpace = createKeySpace(config.SANDSTREAM_NAMESPACE);
  const dispatchKeys = new DispatchKeys(keySpace, config.COMPLETION_SHARDS);
  const consumerName = config.CONSUMER_NAME ?? `${hostname()}-${process.pid}-${Date.now().toString(36)}`;
  // Producer-style connection for scripts and writes, worker-style for BullMQ's blocking reads.
  // Auto-pipelining: thousands of jobs' small commands leave in a few writes instead of one
  // syscall each, which is what lets one instance keep up with 10,000 running jobs.
  const redis = createRedis({
    url: config.REDIS_URL,
    clusterNodes: config.REDIS_CLUSTER_NODES,
    role: 'producer',
    connectionName: `step-dispatcher:${consumerName}`,
    overrides: { enableAutoPipelining: true },
  });
  const workerRedis = createRedisFromEnv(config, 'worker', `step-dispatcher-worker:${consumerName}`);
  // Connection errors surface as rejected commands; these only keep ioredis from printing each.
  for (const client of [redis, workerRedis]) client.on('error', throttledErrorLog(logger, 'redis'));
  await waitForRedis(redis);
  warnAboutRedis(redis, (message) => logger.warn(message));

  const jobStore = new JobStore({ redis, keys: keySpace });
  const destroyQueue = new Queue<SandboxDestroyPayload>(QueueNames.sandboxDestroy, {
    connection: redis,
    prefix: keySpace.bullPrefix,
    defaultJobOptions: DefaultJobOptions,
  });
  const dispatcher = new StepDispatcher({
    redis,
    keySpace,
    dispatchKeys,
    jobStore,
    destroyQueue,
    logger,
    metrics: createSandstreamMetrics(),
    stepGraceMs: config.STEP_GRACE_MS,
    finishedStateTtlMs: config.FINISHED_STATE_TTL_MS,
  });

  const worker = new Worker<DispatchPayload>(
    QueueNames.dispatch,
    async (job) => {
      const parsed = DispatchPayloadSchema.safeParse(job.data);
      if (!parsed.success)
        throw new UnrecoverableError(`invalid dispatch payload: ${formatIssues(parsed.error)}`);
      // The span every step's dispatcher.step span hangs under (step-spans.ts).
      await withJobSpan(
        'dispatcher.dispatch',
        {
          traceContext: parsed.data.traceContext,
          attempt: job.attemptsMade + 1,
          attributes: { 'sandstream.job.id': parsed.data.jobId },
        },
        () => dispatcher.start(parsed.data),
      );
    },
    { connection: workerRedis, prefix: keySpace.bullPrefix, concurrency: config.DISPATCH_CONCURRENCY },
  );
  worker.on('failed', (job, err) => logger.error({ err, jobId: job?.data.jobId }, 'dispatch failed'));
  // BullMQ reports connection trouble here; it reconnects by itself.
  worker.on('error', throttledErrorLog(logger, 'dispatch worker'));
  destroyQueue.on('error', throttledErrorLog(logger, 'destroy queue'));

  // /readyz fails a loop that stopped making progress (each beats after every completed round).
  const watchdog = new ProgressWatchdog();
  const silence = (intervalMs: number) => Math.max(intervalMs * 5, 20_000);

  const completions = new CompletionConsumer({
    redis,
    keys: dispatchKeys,
    consumerName,
    handle: (notice) => dispatcher.onCompletion(notice),
    logger,
    claimIdleMs: config.CLAIM_IDLE_MS,
    onReadProgress: watchdog.track('completion-read', silence(1000)),
    onClaimProgress: watchdog.track('completion-claim', silence(2000)),
  });
  const deadlines = new DeadlineSweeper({
    redis,
    keys: dispatchKeys,
    logger,
    handle: (deadline) => dispatcher.onDeadline(deadline),
    intervalMs: config.DEADLINE_SWEEP_MS,
    onProgress: watchdog.track('deadline-sweep', silence(config.DEADLINE_SWEEP_MS)),
  });
  const heartbeats = new HeartbeatMonitor({
    redis,
    keys: dispatchKeys,
    logger,
    onLost: (jobId) => dispatcher.onSandboxLost(jobId),
    intervalMs: config.HEARTBEAT_CHECK_MS,
    graceMs: config.HEARTBEAT_GRACE_MS,
    reconnectGraceMs: config.HEARTBEAT_RECONNECT_GRACE_MS,
    runningIndexKey: keySpace.jobsByState('running'),
    presence: { presence: new DispatcherPresence(redis, dispatchKeys), instance: consumerName },
    onProgress: watchdog.track('heartbeat-monitor', silence(config.HEARTBEAT_CHECK_MS)),
  });
  await completions.start();
  deadlines.start();
  heartbeats.start();

  const health = await startHealthServer({
    port: config.HEALTH_PORT,
    checks: {
      redis: async () => (await redis.ping()) === 'PONG',
      worker: async () => worker.isRunning(),
      ...watchdog.checks(),
    },
  });
  // Stop taking new work first, then let in-flight handlers finish; whatever is left
  // unacknowledged (a notice, a dispatch, a leased deadline) is redelivered to another instance.
  // One line every 10 s with the completion handling latency (and the load that produced it).
  const latencyReport = setInterval(() => {
    const report = completions.latency.drain();
    if (report) logger.info({ ...report, unit: 'ms' }, 'completion handling latency');
  }, 10_000);
  latencyReport.unref();
  const shutdown = new GracefulShutdown({ logger });
  shutdown.add('stop taking work', async () => health.markDraining());
  shutdown.add('dispatch worker', () => worker.close());
  shutdown.add('completion consumer', async () => {
    clearInterval(latencyReport);
    await completions.stop();
  });
  shutdown.add('deadline sweeper', () => deadlines.stop());
  shutdown.add('heartbeat monitor', () => heartbeats.stop());
  shutdown.add('queues', () => destroyQueue.close());
  shutdown.add('redis', async () => {
    await Promise.allSettled([redis.quit(), workerRedis.quit()]);
  });
  shutdown.add('health server', () => health.close());
  shutdown.add('telemetry', () => telemetry.shutdown());
  logger.info(
    {
      healthPort: health.port,
      consumer: consumerName,
      shards: dispatchKeys.shards,
      namespace: keySpace.namespace,
    },
    'step-dispatcher started',
  );
}

main().catch((err: unknown) => {
  logger.fatal({ err }, 'step-dispatcher failed to start');
  logger.flush();
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 100).unref();
});
