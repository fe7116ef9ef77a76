import { hostname } from 'node:os';
import {
  createKeySpace,
  createRedisFromEnv,
  DispatcherPresence,
  DispatchKeys,
  installationOf,
  JobStore,
  QueueNames,
  SandboxAcl,
  SlotLeases,
  warnAboutRedis,
} from '@sandstream/bus';
import { createBackend, type SandboxBackend } from '@sandstream/sandbox';
import {
  GracefulShutdown,
  loadEnvConfig,
  ProgressWatchdog,
  sleep,
  startHealthServer,
  throttledErrorLog,
} from '@sandstream/service-kit';
import { createLogger, createSandstreamMetrics, initTelemetry } from '@sandstream/telemetry';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { connect } from 'nats';
import { LifecycleRelay } from './lifecycle-relay.js';
import { Reaper } from './reaper.js';
import { ReaperEnvSchema } from './reaper-config.js';

const logger = createLogger({ service: 'reaper' });

async function main(): Promise<void> {
  const env = loadEnvConfig('reaper', ReaperEnvSchema);
  const telemetry = await initTelemetry({ serviceName: 'reaper' });
  const metrics = createSandstreamMetrics();
  const keys = createKeySpace(env.SANDSTREAM_NAMESPACE);
  const redis = createRedisFromEnv(env, 'producer', 'reaper');
  warnAboutRedis(redis, (message) => logger.warn(message));
  // Connection errors surface as rejected commands; this only keeps ioredis from printing each.
  redis.on('error', throttledErrorLog(logger, 'redis'));
  let backend: SandboxBackend | undefined;
  if (env.REAPER_SANDBOXES === 'on') {
    const created = await createBackend({ redis: redis as Redis });
    backend = created.backend;
    logger.info(
      { backend: created.detection.kind, why: created.detection.reason },
      'sandbox backend selected',
    );
  }
  let acl: SandboxAcl | undefined;
  if (env.SANDBOX_ACL !== 'off') {
    const candidate = new SandboxAcl(redis, keys);
    if (await candidate.supported()) acl = candidate;
  }
  const destroyQueue = new Queue(QueueNames.sandboxDestroy, { connection: redis, prefix: keys.bullPrefix });
  destroyQueue.on('error', throttledErrorLog(logger, 'destroy queue'));
  const dispatchKeys = new DispatchKeys(keys, env.COMPLETION_SHARDS);
  const installation = installationOf(env);
  const reaper = new Reaper({
    redis,
    keys,
    store: new JobStore({ redis, keys }),
    leases: new SlotLeases({
      redis,
      keys,
      globalLimit: Number.MAX_SAFE_INTEGER,
      tenantLimit: Number.MAX_SAFE_INTEGER,
      leaseMs: env.LEASE_SECONDS * 1000,
    }),
    dispatchKeys,
    logger,
    ...(backend ? { backend } : {}),
    ...(acl ? { acl } : {}),
    destroyQueue,
    retentionMs: env.REAPER_RETENTION_SECONDS * 1000,
    orphanGraceMs: env.REAPER_ORPHAN_GRACE_SECONDS * 1000,
    sandboxGraceMs: env.REAPER_SANDBOX_GRACE_SECONDS * 1000,
    startingTimeoutMs: env.REAPER_STARTING_TIMEOUT_SECONDS * 1000,
    heartbeatGraceMs: env.REAPER_HEARTBEAT_GRACE_SECONDS * 1000,
    dispatchers: {
      presence: new DispatcherPresence(redis, dispatchKeys),
      absentMs: env.REAPER_DISPATCHER_ABSENT_SECONDS * 1000,
    },
    installation,
    jobIdGlob: env.REAPER_JOB_GLOB,
    scanCount: env.REAPER_SCAN_COUNT,
    pauseMs: env.REAPER_PAUSE_MS,
    onReport: (report) => {
      metrics.reaperScans.add(1, { target: 'all' });
      const deletions: [string, number][] = [
        ['jobs', report.jobsDeleted],
        ['keys', report.orphanKeysDeleted],
        ['leases', report.leasesReclaimed],
        ['sandboxes', report.sandboxesDestroyed],
        ['acl-users', report.aclUsersDeleted],
        ['stuck-jobs', report.jobsFailed],
      ];
      for (const [target, n] of deletions) if (n > 0) metrics.reaperDeletions.add(n, { target });
      logger.info(report, 'reaper pass done');
    },
  });

  const nats = env.NATS_URL ? await connect({ servers: env.NATS_URL, name: 'sandstream-reaper' }) : undefined;
  const relayRedis = nats ? createRedisFromEnv(env, 'worker', 'reaper-nats-relay') : undefined;
  relayRedis?.on('error', throttledErrorLog(logger, 'relay redis'));
  const relay =
    nats && relayRedis
      ? new LifecycleRelay({
          redis: relayRedis,
          keys,
          nats,
          logger,
          subjectPrefix: env.NATS_SUBJECT_PREFIX,
          consumer: `${hostname()}-${process.pid}`,
        })
      : undefined;
  relay?.start();

  let lastPassOk = true;
  const watchdog = new ProgressWatchdog();
  const passDone = watchdog.track('reaper-pass', Math.max(env.REAPER_INTERVAL_SECONDS * 5000, 60_000));
  const shutdown = new GracefulShutdown({ logger });
  const loop = (async () => {
    let failures = 0;
    while (!shutdown.signal.aborted) {
      let pause = env.REAPER_INTERVAL_SECONDS * 1000;
      try {
        await reaper.runOnce(shutdown.signal);
        lastPassOk = true;
        failures = 0;
        passDone();
      } catch (err) {
        lastPassOk = false;
        // One line per outage; retry sooner than a full interval (Redis may be back in seconds).
        if (failures === 0) logger.error({ err: (err as Error).message }, 'reaper pass failed');
        failures++;
        pause = Math.min(pause, 1000 * failures, 10_000);
      }
      await sleep(pause, shutdown.signal);
    }
  })();
  const health = await startHealthServer({
    port: env.HEALTH_PORT,
    checks: {
      redis: async () => (await redis.ping()) === 'PONG',
      lastPass: async () => lastPassOk,
      ...watchdog.checks(),
      ...(nats ? { nats: async () => !nats.isClosed() } : {}),
    },
  });
  shutdown.add('stop taking work', async () => health.markDraining());
  // The pass in progress stops at its next batch boundary (the signal is checked between SCAN calls).
  shutdown.add('reaper loop', () => loop);
  if (relay) shutdown.add('lifecycle relay', () => relay.stop());
  if (nats) shutdown.add('nats', () => nats.drain());
  shutdown.add('queues', () => destroyQueue.close());
  if (backend) shutdown.add('backend', () => backend.close());
  shutdown.add('redis', async () => {
    await Promise.all([redis.quit(), relayRedis?.quit()]);
  });
  shutdown.add('health server', () => health.close());
  shutdown.add('telemetry', () => telemetry.shutdown());
  logger.info(
    { healthPort: health.port, namespace: keys.namespace, natsRelay: relay !== undefined, installation },
    'reaper started',
  );
}

main().catch((err) => {
  logger.fatal({ err: err instanceof Error ? err.message : String(err) }, 'reaper failed to start');
  logger.flush();
  process.exitCode = 1;
  setTimeout(() => process.exit(1), 100).unref();
});
