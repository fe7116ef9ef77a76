#!/usr/bin/env node
import { hostname } from 'node:os';
import {
  type CancelRequestPayload,
  CancelRequestPayloadSchema,
  DefaultJobOptions,
  DispatcherPresence,
  DispatchKeys,
  type DispatchPayload,
  DispatchPayloadSchema,
  JobStore,
  QueueNames,
  type SandboxDestroyPayload,
  SandboxLiveness,
  SlotRelease,
  WORKER_DRAIN_DELAY_SECONDS,
} from '@sandstream/bus';
import { PeriodicTask, ProgressWatchdog, runService, throttledErrorLog } from '@sandstream/service-kit';
import { createSandstreamMetrics, withJobSpan } from '@sandstream/telemetry';
import { formatIssues } from '@sandstream/wire';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import type { z } from 'zod';
import { COMPLETION_BLOCK_MS, CompletionConsumer } from './completion-consumer.js';
import { DispatcherEnvSchema } from './config.js';
import { DeadlineSweeper } from './deadline-sweeper.js';
import { HeartbeatMonitor } from './heartbeat-monitor.js';
import { lockedOutReason } from './lost-sandbox-reason.js';
import { overBudget } from './over-budget.js';
import { OverLimitStop } from './over-limit-stop.js';
import { overRate } from './over-rate.js';
import { RedisBudgetMonitor } from './redis-budget-monitor.js';
import { RedisRateMonitor } from './redis-rate-monitor.js';
import { RunningProbe } from './running-probe.js';
import { StepDispatcher } from './step-dispatcher.js';

/** Time an agent has to confirm a cancel before the job ends `cancelled` anyway. */
const CANCEL_CONFIRM_MS = 3_000;

let consumer: string | undefined;
/** This instance's name in the completion group (unique per process by default); also names its connections. */
const consumerNameOf = (config: { CONSUMER_NAME?: string | undefined }): string =>
  (consumer ??= config.CONSUMER_NAME ?? `${hostname()}-${process.pid}-${Date.now().toString(36)}`);

runService({
  name: 'step-dispatcher',
  env: DispatcherEnvSchema,
  waitForRedis: true,
  redis: {
    connectionName: (config) => `step-dispatcher:${consumerNameOf(config)}`,
    // Auto-pipelining: thousands of jobs' small commands leave in a few writes instead of one
    // syscall each, which is what lets one instance keep up with 10,000 running jobs.
    overrides: { enableAutoPipelining: true },
  },
  async start({ env: config, logger, keys: keySpace, redis, connect, onShutdown }) {
    const dispatchKeys = new DispatchKeys(keySpace, config.COMPLETION_SHARDS);
    const consumerName = consumerNameOf(config);
    // Worker-style connection for BullMQ's blocking reads.
    const workerRedis = connect('worker', `step-dispatcher-worker:${consumerName}`);
    const jobStore = new JobStore({ redis, keys: keySpace });
    // Its own connection: BullMQ defines its ~40 scripts as commands on the connection it is
    // given, and ioredis copies every one onto each Pipeline it builds, which auto-pipelining
    // does once per tick: on the dispatch connection that copying was ~16 % of the dispatcher's
    // CPU per live-sandbox command (docs/benchmarks.md, "CPU per exec").
    const destroyQueue = new Queue<SandboxDestroyPayload>(QueueNames.sandboxDestroy, {
      connection: connect('producer', `step-dispatcher-destroy:${consumerName}`),
      prefix: keySpace.bullPrefix,
      defaultJobOptions: DefaultJobOptions,
    });
    // /readyz fails a loop that stopped making progress (each beats after every completed round).
    const watchdog = new ProgressWatchdog();
    const silence = (intervalMs: number) => Math.max(intervalMs * 5, 20_000);
    // Loops that only look at running jobs rest while none runs (issue 32: idle CPU).
    const probe = new RunningProbe({
      redis,
      keys: dispatchKeys,
      runningIndexKey: keySpace.jobsByState('running'),
      idleRecheckMs: config.IDLE_RECHECK_MS,
    });
    const deadlines = new DeadlineSweeper({
      redis,
      keys: dispatchKeys,
      logger,
      handle: (deadline) => dispatcher.onDeadline(deadline),
      intervalMs: config.DEADLINE_SWEEP_MS,
      idleMaxMs: config.IDLE_RECHECK_MS,
      onProgress: watchdog.track('deadline-sweep', silence(config.IDLE_RECHECK_MS)),
    });
    let monitors: { wake(): void }[] = [];
    const dispatcher = new StepDispatcher({
      redis,
      keySpace,
      dispatchKeys,
      jobStore,
      destroyQueue,
      slots: new SlotRelease({ redis, keys: keySpace }),
      logger,
      metrics: createSandstreamMetrics(),
      stepGraceMs: config.STEP_GRACE_MS,
      finishedStateTtlMs: config.FINISHED_STATE_TTL_MS,
      cancelConfirmMs: CANCEL_CONFIRM_MS,
      maxSandboxLifetimeSeconds: config.SANDBOX_MAX_LIFETIME_SECONDS,
      onDeadlineSet: (at) => deadlines.wake(at),
      onRunning: () => {
        probe.noteRunning();
        heartbeats.noteRunning();
        for (const monitor of monitors) monitor.wake();
      },
    });

    const worker = new Worker<DispatchPayload>(
      QueueNames.dispatch,
      validated(DispatchPayloadSchema, 'dispatch payload', (payload, job) =>
        // The span every step's dispatcher.step span hangs under (step-spans.ts).
        withJobSpan(
          'dispatcher.dispatch',
          {
            traceContext: payload.traceContext,
            attempt: job.attemptsMade + 1,
            attributes: { 'sandstream.job.id': payload.jobId },
          },
          () => dispatcher.start(payload),
        ),
      ),
      {
        connection: workerRedis,
        prefix: keySpace.bullPrefix,
        concurrency: config.DISPATCH_CONCURRENCY,
        drainDelay: WORKER_DRAIN_DELAY_SECONDS,
      },
    );
    worker.on('failed', (job, err) => logger.error({ err, jobId: job?.data.jobId }, 'dispatch failed'));
    // Cancel requests of SDK and API callers (libs/bus cancel-request.ts); cheap, so few at once.
    const cancelWorker = new Worker<CancelRequestPayload>(
      QueueNames.dispatchCancel,
      validated(CancelRequestPayloadSchema, 'cancel request', (payload) =>
        payload.lifetime === true
          ? dispatcher.onLifetimeRequest(payload.jobId)
          : payload.pause === true
            ? dispatcher.onPauseRequest(payload.jobId)
            : dispatcher.onCancelRequest(payload.jobId, payload.reason),
      ),
      {
        connection: connect('worker', `step-dispatcher-cancel:${consumerName}`),
        prefix: keySpace.bullPrefix,
        concurrency: 8,
        drainDelay: WORKER_DRAIN_DELAY_SECONDS,
      },
    );
    cancelWorker.on('failed', (job, err) =>
      logger.error({ err, jobId: job?.data.jobId }, 'cancel request failed'),
    );
    // BullMQ reports connection trouble here; it reconnects by itself.
    worker.on('error', throttledErrorLog(logger, 'dispatch worker'));
    cancelWorker.on('error', throttledErrorLog(logger, 'dispatch-cancel worker'));
    destroyQueue.on('error', throttledErrorLog(logger, 'destroy queue'));

    const completions = new CompletionConsumer({
      redis,
      keys: dispatchKeys,
      consumerName,
      handle: (notice) => dispatcher.onCompletion(notice),
      logger,
      claimIdleMs: config.CLAIM_IDLE_MS,
      onReadProgress: watchdog.track('completion-read', silence(COMPLETION_BLOCK_MS)),
      onClaimProgress: watchdog.track('completion-claim', silence(Math.max(2000, config.CLAIM_IDLE_MS / 2))),
    });
    const heartbeats = new HeartbeatMonitor({
      redis,
      keys: dispatchKeys,
      logger,
      onLost: (jobId, detail, reason) => dispatcher.onSandboxLost(jobId, detail, reason),
      // A late heartbeat is checked with the backend (through pod-lifecycle) before it fails a sandbox.
      liveness: {
        store: new SandboxLiveness(redis, keySpace),
        verdictWaitMs: config.HEARTBEAT_VERDICT_WAIT_MS,
        lateMaxMs: config.HEARTBEAT_LATE_MAX_MS,
        lockedOut: (jobId) => lockedOutReason(redis, keySpace, jobId),
      },
      intervalMs: config.HEARTBEAT_CHECK_MS,
      graceMs: config.HEARTBEAT_GRACE_MS,
      reconnectGraceMs: config.HEARTBEAT_RECONNECT_GRACE_MS,
      runningIndexKey: keySpace.jobsByState('running'),
      // Stamped every round: the reaper fails running jobs only when no dispatcher is alive.
      presence: { presence: new DispatcherPresence(redis, dispatchKeys), instance: consumerName },
      anyRunning: () => probe.anyRunning(),
      // While nothing runs only the presence is stamped: on the idle loops' shared tick.
      idleMaxMs: config.IDLE_RECHECK_MS,
      onProgress: watchdog.track(
        'heartbeat-monitor',
        silence(Math.max(config.HEARTBEAT_CHECK_MS, config.IDLE_RECHECK_MS)),
      ),
    });
    const budgetBytes = config.SANDBOX_REDIS_BUDGET_MB * 1024 * 1024;
    const overLimit = new OverLimitStop({ redis, keySpace, dispatcher, logger });
    const budget =
      budgetBytes > 0
        ? new RedisBudgetMonitor({
            redis,
            logger,
            budgetBytes,
            intervalMs: config.REDIS_BUDGET_CHECK_MS,
            anyRunning: () => probe.anyRunning(),
            idleMaxMs: config.IDLE_RECHECK_MS,
            measureEveryMs: config.REDIS_BUDGET_MEASURE_MS,
            runningJobs: () => heartbeats.runningJobs(),
            lockKey: keySpace.lock('redis-budget'),
            onOverBudget: (usage) => overLimit.stop(overBudget(usage, { budgetBytes, redis, keySpace })),
            onProgress: watchdog.track(
              'redis-budget',
              silence(Math.max(config.REDIS_BUDGET_CHECK_MS, config.IDLE_RECHECK_MS)),
            ),
          })
        : undefined;
    const limitPerSecond = config.SANDBOX_REDIS_RATE_LIMIT;
    const rate =
      limitPerSecond > 0
        ? new RedisRateMonitor({
            redis,
            logger,
            limitPerSecond,
            intervalMs: config.REDIS_RATE_CHECK_MS,
            anyRunning: () => probe.anyRunning(),
            idleMaxMs: config.IDLE_RECHECK_MS,
            windowMs: config.REDIS_RATE_WINDOW_MS,
            runningJobs: () => heartbeats.runningJobs(),
            lockKey: keySpace.lock('redis-rate'),
            onOverRate: (measured) => overLimit.stop(overRate(measured, limitPerSecond)),
            onProgress: watchdog.track(
              'redis-rate',
              silence(Math.max(config.REDIS_RATE_CHECK_MS, config.IDLE_RECHECK_MS)),
            ),
          })
        : undefined;
    monitors = [budget, rate].filter((m) => m !== undefined);
    await completions.start();
    deadlines.start();
    heartbeats.start();
    budget?.start();
    rate?.start();

    // One line every 10 s with the completion handling latency (and the load that produced it),
    // on the idle loops' shared tick rather than a wake-up of its own.
    const latencyReport = new PeriodicTask(async () => {
      const report = completions.latency.drain();
      if (report) logger.info({ ...report, unit: 'ms' }, 'completion handling latency');
    }, 10_000);
    latencyReport.start();
    // Stop taking new work first, then let in-flight handlers finish; whatever is left
    // unacknowledged (a notice, a dispatch, a leased deadline) is redelivered to another instance.
    onShutdown('dispatch worker', async () => {
      await Promise.all([worker.close(), cancelWorker.close()]);
    });
    onShutdown('completion consumer', async () => {
      await latencyReport.stop();
      await completions.stop();
    });
    onShutdown('deadline sweeper', () => deadlines.stop());
    onShutdown('heartbeat monitor', () => heartbeats.stop());
    onShutdown('redis budget monitor', async () => budget?.stop());
    onShutdown('redis rate monitor', async () => rate?.stop());
    onShutdown('queues', () => destroyQueue.close());
    return {
      checks: {
        worker: async () => worker.isRunning() && cancelWorker.isRunning(),
        ...watchdog.checks(),
      },
      info: { consumer: consumerName, shards: dispatchKeys.shards },
    };
  },
});

/** A processor that validates its payload first: a malformed one fails for good, naming the field. */
function validated<T>(
  schema: z.ZodType<T>,
  what: string,
  handle: (payload: T, job: Job) => Promise<void>,
): (job: Job) => Promise<void> {
  return async (job) => {
    const parsed = schema.safeParse(job.data);
    if (!parsed.success) throw new UnrecoverableError(`invalid ${what}: ${formatIssues(parsed.error)}`);
    await handle(parsed.data, job);
  };
}
