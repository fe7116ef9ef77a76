import {
  AgentAnnouncements,
  DispatchKeys,
  installationOf,
  JobStore,
  LeaseRenewal,
  QueueNames,
  SandboxLiveness,
} from '@sandstream/bus';
import { createBackend, resourcePolicyOf } from '@sandstream/sandbox';
import { openSandboxAcl, ProgressWatchdog, runService, throttledErrorLog } from '@sandstream/service-kit';
import { createSandstreamMetrics, withJobSpan } from '@sandstream/telemetry';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { agentEnvFor, logArchiveOn } from './agent-env.js';
import { createDestroyProcessor } from './destroy-sandbox.js';
import { LeaseKeeper } from './lease-keeper.js';
import { LivenessProber } from './liveness-prober.js';
import { destroyGraceMs, PodLifecycleEnvSchema } from './pod-lifecycle-config.js';
import { SandboxUserRestorer } from './sandbox-user-restorer.js';
import { failExhaustedStart } from './start-failure.js';
import { createStartProcessor } from './start-sandbox.js';
import { openWarmPools } from './warm-pools.js';

runService({
  name: 'pod-lifecycle',
  env: PodLifecycleEnvSchema,
  shutdownTimeoutMs: 60_000,
  async start({ env, logger, keys, redis, connect, onShutdown }) {
    const metrics = createSandstreamMetrics();
    const dispatchKeys = new DispatchKeys(keys, env.COMPLETION_SHARDS);
    const createRedisConn = connect('worker', 'pod-lifecycle-create');
    const destroyRedisConn = connect('worker', 'pod-lifecycle-destroy');
    // Agents announce themselves on their ready channels: one pattern subscription serves every
    // start of this replica (subscribed before the create worker takes any job).
    const announcements = new AgentAnnouncements(connect('worker', 'pod-lifecycle-ready'));
    await announcements.start();
    const prefix = keys.bullPrefix;

    const installation = installationOf(env);
    const { backend, detection } = await createBackend({
      redis: redis as Redis,
      resourcePolicy: resourcePolicyOf(env),
    });
    logger.info({ backend: detection.kind, why: detection.reason }, 'sandbox backend selected');
    if (detection.kind === 'inprocess') {
      // Said at every start: a developer convenience must never pass for a boundary.
      logger.warn(
        'the in-process backend is no isolation boundary: steps run as this user on this machine, with its network and files (file steps stay in the job directory, run steps do not); run untrusted work on the Docker or Kubernetes backend',
      );
    }

    const acl = await openSandboxAcl(env.SANDBOX_ACL, redis, keys);
    if (!acl && env.SANDBOX_ACL === 'auto') {
      logger.warn('Redis does not accept ACL commands: sandboxes share the service credentials');
    }

    const store = new JobStore({ redis, keys });
    // pod-lifecycle renews the leases of live jobs and frees them when a destroy finds the job
    // ended; limits are the scheduler's.
    const leases = new LeaseRenewal({ redis, keys, leaseMs: env.LEASE_SECONDS * 1000 });
    const dispatchQueue = new Queue(QueueNames.dispatch, { connection: redis, prefix });
    const destroyQueue = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix });
    const warm = await openWarmPools({
      env,
      logger,
      redis,
      keys,
      backend,
      acl,
      announcements,
      installation,
      metrics,
      agentRedisUrl: env.AGENT_REDIS_URL ?? env.REDIS_URL,
      ...withAgentEnv(agentEnvFor(env)),
    });
    const start = createStartProcessor({
      store,
      leases,
      redis,
      keys,
      dispatchKeys,
      backend,
      announcements,
      acl,
      agentRedisUrl: env.AGENT_REDIS_URL ?? env.REDIS_URL,
      ...withAgentEnv(agentEnvFor(env)),
      dispatchQueue,
      destroyQueue,
      logger,
      installation,
      onStarted: (seconds, kind) => {
        metrics.sandboxStartSeconds.record(seconds, { backend: kind });
        metrics.activeSandboxes.add(1, { backend: kind });
      },
      ...(warm ? { warm: warm.start } : {}),
    });
    const destroy = createDestroyProcessor({
      store,
      leases,
      redis,
      keys,
      backend,
      acl,
      graceMs: destroyGraceMs(env),
      logger,
      onDestroyed: (kind) => metrics.activeSandboxes.add(-1, { backend: kind }),
      ...(warm ? { pools: warm.store } : {}),
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
    if (warm) {
      warm.keeper.start();
      onShutdown('warm pools', () => warm.close());
    }
    // Re-creates the Redis users of starting/running jobs that a Redis restart lost.
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
    // Answers the step-dispatcher's late-heartbeat suspects: does the sandbox still run?
    const prober = new LivenessProber({
      liveness: new SandboxLiveness(redis, keys),
      store,
      backend,
      logger,
      intervalMs: env.LIVENESS_PROBE_MS,
      onProgress: watchdog.track('liveness-prober', Math.max(env.LIVENESS_PROBE_MS * 5, 20_000)),
    });
    prober.start();
    for (const queue of [dispatchQueue, destroyQueue]) {
      queue.on('error', throttledErrorLog(logger, `${queue.name} queue`));
    }

    // In-flight starts and destroys finish; what is left stays queued for another replica.
    onShutdown('workers', async () => {
      await Promise.all([createWorker.close(), destroyWorker.close()]);
    });
    // After the workers: an in-flight start still listens for its agent.
    onShutdown('ready announcements', () => announcements.close());
    onShutdown('lease keeper', () => keeper.stop());
    if (restorer) onShutdown('sandbox user restore', () => restorer.stop());
    onShutdown('liveness prober', () => prober.stop());
    onShutdown('queues', async () => {
      await Promise.all([dispatchQueue.close(), destroyQueue.close()]);
    });
    onShutdown('backend', () => backend.close());
    return {
      checks: {
        workers: async () => createWorker.isRunning() && destroyWorker.isRunning(),
        ...watchdog.checks(),
      },
      info: { acl: acl !== null, installation, logArchive: logArchiveOn(env) },
    };
  },
});

function withAgentEnv(agentEnv: Record<string, string> | undefined): { agentEnv?: Record<string, string> } {
  return agentEnv ? { agentEnv } : {};
}
