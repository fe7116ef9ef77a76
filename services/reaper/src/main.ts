import {
  DispatcherPresence,
  DispatchKeys,
  deriveInstallation,
  ExpiredLeases,
  InstallationIdentity,
  installationOf,
  JobStore,
  natsUrlOptions,
  PausedFilesQuota,
  pausedFilesStoreOf,
  pausedObjectKept,
  pausedObjectOwner,
  QueueNames,
  SnapshotRecords,
  SnapshotStore,
  WarmPoolStore,
} from '@sandstream/bus';
import { createBackend, type SandboxBackend } from '@sandstream/sandbox';
import {
  openSandboxAcl,
  ProgressWatchdog,
  runService,
  sleep,
  throttledErrorLog,
} from '@sandstream/service-kit';
import { createSandstreamMetrics } from '@sandstream/telemetry';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { connect as connectNats } from 'nats';
import { startLifecycleRelay } from './lifecycle-relay-service.js';
import { Reaper } from './reaper.js';
import { ReaperEnvSchema } from './reaper-config.js';
import { mayBeOurs } from './sandbox-ownership.js';
import { SnapshotReaper } from './snapshot-reaper.js';

runService({
  name: 'reaper',
  env: ReaperEnvSchema,
  // A pass's commands (glances, delete scripts, index removals of up to 20 jobs at once) leave in
  // one write per event-loop turn instead of a syscall each: the socket writes were the largest
  // share of the reaper's CPU per job (docs/benchmarks.md).
  redis: { overrides: { enableAutoPipelining: true } },
  async start({ env, logger, keys, redis, connect, signal, onShutdown }) {
    const metrics = createSandstreamMetrics();
    // Cleanup only: with SANDBOX_ACL=on and no ACL support pod-lifecycle refuses to start, so
    // there are no users to clean up either.
    const acl = await openSandboxAcl(env.SANDBOX_ACL === 'on' ? 'auto' : env.SANDBOX_ACL, redis, keys);
    // On a connection of its own: BullMQ defines its scripts as commands on its connection, and
    // ioredis copies every defined command onto each auto-pipeline (see queueConnection).
    const destroyQueue = new Queue(QueueNames.sandboxDestroy, {
      connection: connect('producer', 'reaper-destroy-queue'),
      prefix: keys.bullPrefix,
    });
    destroyQueue.on('error', throttledErrorLog(logger, 'destroy queue'));
    const dispatchKeys = new DispatchKeys(keys, env.COMPLETION_SHARDS);
    // This Redis's installation id (installation.ts); each pass re-reads it (and writes it back
    // to a Redis that lost it), so sandboxes made against this Redis stay recognisable.
    // A Redis that is down at start must not keep the reaper from starting (its passes wait for
    // Redis anyway): each pass refreshes the id before it uses it.
    const identity = new InstallationIdentity(redis, keys);
    await identity
      .refresh()
      .catch((err: Error) =>
        logger.warn({ err: err.message }, 'installation id not read yet: Redis does not answer'),
      );
    const installationNames = () => [installationOf(env, identity.id), deriveInstallation(env)];
    let backend: SandboxBackend | undefined;
    if (env.REAPER_SANDBOXES === 'on') {
      const created = await createBackend({
        redis: redis as Redis,
        // The sandbox pass judges only this installation's sandboxes: an in-process list() leaves
        // the others' markers out before probing them (the ids as this pass's `known` read them).
        inProcessOptions: {
          installation: (labels) => mayBeOurs(labels, installationNames, identity.lastKnown),
        },
      });
      backend = created.backend;
      logger.info(
        { backend: created.detection.kind, why: created.detection.reason },
        'sandbox backend selected',
      );
    }
    // Snapshots (their bytes in NATS JetStream): expired ones, dead uploads, orphaned bytes.
    const snapshotNats = env.NATS_URL
      ? await connectNats({
          ...natsUrlOptions(env.NATS_URL),
          name: 'reaper-snapshots',
          maxReconnectAttempts: -1,
        })
      : undefined;
    // Paused sandboxes' kept files live in the same store: discarded by the job pass.
    const snapshotObjects = snapshotNats ? new SnapshotStore(snapshotNats, keys.namespace) : undefined;
    const pausedQuota = new PausedFilesQuota(redis, keys);
    const pausedFiles = snapshotObjects ? pausedFilesStoreOf(snapshotObjects, pausedQuota) : undefined;
    const jobStore = new JobStore({ redis, keys });
    const reaper = new Reaper({
      redis,
      keys,
      store: jobStore,
      leases: new ExpiredLeases({ redis, keys }),
      dispatchKeys,
      logger,
      ...(backend ? { backend } : {}),
      ...(acl ? { acl } : {}),
      pools: new WarmPoolStore(redis, keys),
      destroyQueue,
      retentionMs: env.REAPER_RETENTION_SECONDS * 1000,
      fullScanEvery: Math.max(1, Math.round(env.REAPER_FULL_SCAN_SECONDS / env.REAPER_INTERVAL_SECONDS)),
      paused: {
        maxRetentionMs: env.SANDBOX_MAX_PAUSED_RETENTION_SECONDS * 1000,
        ...(pausedFiles ? { files: { discard: (kept: string) => pausedFiles.delete(kept) } } : {}),
      },
      // With the archive on here, every job's log must be archived before its keys go; without
      // it (the archive may run in relay-main.ts), jobs the archiver marked pending still wait.
      logArchive: {
        required: env.NATS_URL !== undefined && env.LOG_ARCHIVE === 'on',
        holdMs: env.LOG_ARCHIVE_HOLD_SECONDS * 1000,
      },
      orphanGraceMs: env.REAPER_ORPHAN_GRACE_SECONDS * 1000,
      sandboxGraceMs: env.REAPER_SANDBOX_GRACE_SECONDS * 1000,
      startingTimeoutMs: env.REAPER_STARTING_TIMEOUT_SECONDS * 1000,
      heartbeatGraceMs: env.REAPER_HEARTBEAT_GRACE_SECONDS * 1000,
      dispatchers: {
        presence: new DispatcherPresence(redis, dispatchKeys),
        absentMs: env.REAPER_DISPATCHER_ABSENT_SECONDS * 1000,
      },
      installation: {
        identity,
        // The name, and the derived default older versions labelled sandboxes with.
        names: installationNames,
      },
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

    const snapshotReaper = snapshotNats
      ? new SnapshotReaper({
          records: new SnapshotRecords(redis, keys),
          objects: snapshotObjects ?? new SnapshotStore(snapshotNats, keys.namespace),
          // A paused sandbox's files have no snapshot record: its job record names them.
          isPausedObjectKept: (name: string) => pausedObjectKept(jobStore, name),
          // Counted in its tenant's bytes when stored; given back when its owner's record still says whose.
          onPausedOrphanDeleted: async (name: string) => {
            const owner = pausedObjectOwner(name);
            const tenant = owner === null ? undefined : (await jobStore.get(owner))?.tenant;
            if (tenant !== undefined) await pausedQuota.release(tenant, name);
          },
          uploadGraceMs: env.SNAPSHOT_UPLOAD_GRACE_SECONDS * 1000,
          logger,
        })
      : undefined;

    let lastPassOk = true;
    // /readyz fails a pass loop that stopped making progress.
    const watchdog = new ProgressWatchdog();
    const passDone = watchdog.track('reaper-pass', Math.max(env.REAPER_INTERVAL_SECONDS * 5000, 60_000));
    const loop = (async () => {
      let failures = 0;
      while (!signal.aborted) {
        let pause = env.REAPER_INTERVAL_SECONDS * 1000;
        try {
          await reaper.runOnce(signal);
          await snapshotReaper?.runOnce();
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
        await sleep(pause, signal);
      }
    })();
    // The pass in progress stops at its next batch boundary (the signal is checked between SCAN calls).
    onShutdown('reaper loop', () => loop);
    if (snapshotNats) onShutdown('snapshot nats', () => snapshotNats.drain());
    // By default the reaper also hosts the lifecycle relay (relay-main.ts runs it on its own).
    const nats = env.NATS_URL
      ? await startLifecycleRelay({
          natsUrl: env.NATS_URL,
          subjectPrefix: env.NATS_SUBJECT_PREFIX,
          keys,
          redis: connect('worker', 'reaper-nats-relay'),
          logger,
          onShutdown,
          logArchive: {
            env,
            lifecycleRedis: connect('worker', 'reaper-log-archive-discovery'),
            redis: connect('worker', 'reaper-log-archive'),
            metrics: metrics.logArchive,
          },
        })
      : undefined;
    onShutdown('queues', () => destroyQueue.close());
    if (backend) onShutdown('backend', () => backend.close());
    return {
      checks: {
        lastPass: async () => lastPassOk,
        ...watchdog.checks(),
        ...(nats ? { nats: nats.ready } : {}),
      },
      ...(nats ? { liveness: { nats: nats.live } } : {}),
      info: {
        natsRelay: nats !== undefined,
        logArchive: nats?.archiver?.streamName ?? 'off',
        installation: env.SANDSTREAM_INSTALLATION ?? "this Redis's installation id",
      },
    };
  },
});
