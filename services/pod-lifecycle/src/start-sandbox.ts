import {
  type AgentAnnouncements,
  bullJobId,
  clusterAgentRoute,
  DefaultJobOptions,
  type DispatchKeys,
  type DispatchPayload,
  enqueueDestroy,
  isLiveSandboxSpec,
  type JobSandbox,
  type JobStore,
  type KeySpace,
  type LeaseRenewal,
  parseStoredSpec,
  type RedisClient,
  type SandboxAcl,
  SandboxCreatePayloadSchema,
  type SandboxCredentials,
  type SandboxDestroyPayload,
  type SandboxStart,
  sandboxRefOf,
  saveSandboxUser,
  tearDownSandbox,
  urlWithCredentials,
} from '@sandstream/bus';
import {
  type SandboxBackend,
  SandboxLabels,
  type SandboxRef,
  type SandboxSpec,
  SandboxSpecSchema,
  SandboxStartError,
} from '@sandstream/sandbox';
import { injectTraceContext, type Logger, withSpan } from '@sandstream/telemetry';
import { formatIssues } from '@sandstream/wire';
import type { Job, Queue } from 'bullmq';
import { Cluster } from 'ioredis';
import { CreateProgressReporter } from './create-progress.js';
import type { FetchedKeptFiles } from './fetched-kept-files.js';
import type { PausedFiles } from './paused-files.js';
import {
  SnapshotStartRefused,
  type SnapshotStarts,
  StartSnapshot,
  startSnapshotOf,
} from './start-from-snapshot.js';
import type { WarmStart } from './warm-start.js';

export interface StartDeps {
  store: JobStore;
  /** Gives the slot back when the job no longer wants a sandbox. */
  leases: LeaseRenewal;
  redis: RedisClient;
  keys: KeySpace;
  dispatchKeys: DispatchKeys;
  backend: SandboxBackend;
  /** Where agents' ready announcements are heard (subscribed before any start runs). */
  announcements: AgentAnnouncements;
  /** Null when per-sandbox Redis users are off. */
  acl: SandboxAcl | null;
  /** Redis as the agent reaches it, without credentials. */
  agentRedisUrl: string;
  dispatchQueue: Queue;
  destroyQueue: Queue;
  logger: Logger;
  /** Extra environment for the agent (its OTLP endpoint, so step spans join the job's trace). */
  agentEnv?: Record<string, string>;
  /** This installation's id, put on every sandbox as a label (the reaper's orphan pass reads it). */
  installation: string;
  /** This Redis's installation id (InstallationIdentity), put on every sandbox beside the name. */
  installationId?: () => string;
  /** Called with the create-to-ready latency of each started sandbox. */
  onStarted?: (seconds: number, backend: string) => void;
  /** Claims from warm pools first; absent, every start is cold. */
  warm?: WarmStart;
  /** Puts a resumed sandbox's kept files back (the snapshots' restore). */
  files?: PausedFiles | undefined;
  /** Puts a snapshot's files into a sandbox created from it or forked (absent: such a start fails). */
  snapshots?: SnapshotStarts | undefined;
}

export type StartOutcome = 'dispatched' | 'failed' | 'cancelled' | 'skipped';

/** What a start fetches while its sandbox is made, let go of when the start ends (used or not). */
interface Prefetched {
  discard(): void;
}

/**
 * The `sandbox-create` processor: scheduled -> starting, create, wait until the agent
 * heart-beats, -> running, enqueue `dispatch`. A start failure that more waiting can fix
 * (capacity) is thrown so BullMQ retries it with backoff; any other failure marks the job
 * failed with the backend's operator-facing reason and sends the sandbox to `sandbox-destroy`,
 * which also frees the slot.
 */
export function createStartProcessor(deps: StartDeps) {
  const start = startProcessor(deps);
  return async (job: Job): Promise<StartOutcome> => {
    const fetched: Prefetched[] = [];
    try {
      return await start(job, fetched);
    } finally {
      for (const bytes of fetched) bytes.discard();
    }
  };
}

function startProcessor(deps: StartDeps) {
  return async (job: Job, fetched: Prefetched[]): Promise<StartOutcome> => {
    const parsed = SandboxCreatePayloadSchema.safeParse(job.data);
    if (!parsed.success) {
      deps.logger.error(
        { bullJobId: job.id, problems: formatIssues(parsed.error) },
        'malformed sandbox-create payload',
      );
      return 'skipped';
    }
    const payload = parsed.data;
    const { jobId } = payload;
    const log = deps.logger.child({ jobId });
    const traceContext = payload.traceContext ? { traceContext: payload.traceContext } : {};
    const destroy = (reason: string, outcome: SandboxDestroyPayload['outcome']) =>
      enqueueDestroy(deps.destroyQueue, { jobId, reason, ...(outcome ? { outcome } : {}), ...traceContext });

    // On a Redis Cluster the agent talks to the master of its job's slot only (libs/bus clusterAgentRoute).
    const routeFor = () =>
      deps.redis instanceof Cluster
        ? clusterAgentRoute(deps.redis, deps.dispatchKeys, jobId, deps.agentRedisUrl)
        : Promise.resolve({
            redisUrl: deps.agentRedisUrl,
            notifyStream: deps.dispatchKeys.completionStreamFor(jobId),
          });
    const addDispatch = async (sandbox: DispatchPayload['sandbox'], notifyStream: string) => {
      const dispatch: DispatchPayload = {
        jobId,
        sandbox,
        notifyStream,
        ...traceContext,
        // The dispatcher's spans are children of this start span (telemetry off: unchanged).
        ...startSpanContext(),
      };
      // Keyed by the job (and its life, for a resumed sandbox): a repeated add (redelivery) is a no-op.
      await deps.dispatchQueue.add('dispatch', dispatch, {
        ...DefaultJobOptions,
        jobId: bullJobId(jobId, lifeOf(jobId)),
        attempts: 5,
        backoff: { type: 'exponential', delay: 1000 },
      });
    };

    const record = await deps.store.get(jobId);
    const lifeOf = (_id: string) => record?.resumes ?? 0;
    if (record?.state === 'running' && record.sandbox) {
      // Redelivered after a crash between `running` and the dispatch add: finish that step,
      // else nobody would ever push the job's steps.
      const { notifyStream } = await routeFor();
      await addDispatch({ jobId, backend: record.sandbox.backend, id: record.sandbox.id }, notifyStream);
      log.info('re-announced a running sandbox after a redelivery');
      return 'dispatched';
    }
    if (!record || !['scheduled', 'starting'].includes(record.state)) {
      log.info({ state: record?.state ?? 'missing' }, 'job no longer wants a sandbox');
      if (record && record.state !== 'running') await deps.leases.release(jobId, record.tenant);
      return 'skipped';
    }
    if (record.cancelRequested !== undefined) {
      await deps.store.transition(jobId, ['scheduled', 'starting'], 'cancelled', {
        reason: record.cancelRequested,
      });
      await destroy(`cancelled before start: ${record.cancelRequested}`, 'cancelled');
      return 'cancelled';
    }
    const spec = SandboxSpecSchema.safeParse(payload.sandbox);
    if (!spec.success) {
      const reason = `invalid sandbox spec: ${formatIssues(spec.error, 'sandbox')}`;
      await deps.store.transition(jobId, ['scheduled', 'starting'], 'failed', { reason });
      await destroy(reason, 'failed');
      return 'failed';
    }
    await deps.store.transition(jobId, ['scheduled'], 'starting');
    const unpausable = payload.live ? unpausableReason(deps, spec.data) : undefined;
    if (unpausable !== undefined && idlePauses(record.spec)) {
      // Its idle limit would pause it, and it cannot pause here: refused now, loudly, rather
      // than lose its files when it goes idle.
      const reason = `sandbox did not start: onIdle 'pause' cannot be honoured: this sandbox cannot pause: ${unpausable}`;
      await deps.store.transition(jobId, ['starting'], 'failed', { reason });
      await destroy(reason, 'failed');
      return 'failed';
    }
    if (record.sandbox || record.state === 'starting') {
      // An earlier attempt got this far (a redelivery after a crash mid-start, or a retry): its
      // sandbox may exist, and what its agent left in Redis (steps, control, a heartbeat) would
      // feed or fake this one's. Start clean. A sandbox it made but did not record yet is the
      // backend's to replace in create(); its keys go here.
      await tearDownPartial(deps, jobId, record.sandbox);
    }

    // A first life from a snapshot: its bytes are fetched while the sandbox is made (StartSnapshot).
    // A resumed one has its own kept files, newer than the snapshot.
    const fromSnapshot =
      record.pausedFiles === undefined && lifeOf(jobId) === 0 ? startSnapshotOf(record.spec) : undefined;
    const snapshot =
      fromSnapshot !== undefined ? new StartSnapshot(deps.snapshots, fromSnapshot, record.tenant) : undefined;
    if (snapshot) fetched.push(snapshot);
    // A resume's kept files likewise: read and checked while the sandbox is made.
    const kept = record.pausedFiles !== undefined ? deps.files?.fetch(record.pausedFiles) : undefined;
    if (kept) fetched.push(kept);
    /**
     * The kept or snapshot files into the new sandbox: undefined once they are there (or there
     * are none), or why the snapshot can never start one. A failure of the store or the engine
     * throws (the start is retried on a clean sandbox).
     */
    const putFiles = async (ref: SandboxRef): Promise<string | undefined> => {
      if (record.pausedFiles !== undefined) {
        const begun = performance.now();
        await restoreKeptFiles(deps, ref, kept);
        log.info(
          { restoreMs: Math.round(performance.now() - begun), fetchMs: kept?.fetchMs() },
          'kept files restored into the resumed sandbox',
        );
        return undefined;
      }
      if (snapshot === undefined) return undefined;
      try {
        const timings = await snapshot.restoreInto(jobId, ref);
        log.info({ snapshotId: fromSnapshot, ...timings }, 'snapshot files restored into the new sandbox');
        return undefined;
      } catch (err) {
        if (!(err instanceof SnapshotStartRefused)) throw err;
        return err.message;
      }
    };
    /**
     * The sandbox's agent is up (cold or warm): its files in (put while it booted, where the
     * backend restores then, or now), running, and its steps go out.
     */
    const enterRunning = async (ref: SandboxRef, filesPut = putFiles(ref)): Promise<StartOutcome> => {
      const refused = await filesPut;
      if (refused !== undefined) {
        const reason = `sandbox did not start: ${refused}`;
        log.warn({ reason, snapshotId: fromSnapshot }, 'sandbox start failed');
        await deps.store.transition(jobId, ['starting'], 'failed', { reason });
        await destroy(reason, 'failed');
        return 'failed';
      }
      // Only now, with the agent up, does the kept copy go: a start that fails before this is
      // retried from the kept files, which the record still names.
      if (kept) {
        const begun = performance.now();
        await forgetKeptFiles(deps, jobId, kept);
        log.info({ discardMs: Math.round(performance.now() - begun) }, 'kept files discarded');
      }
      if (await deps.store.isCancelRequested(jobId)) {
        await deps.store.transition(jobId, ['starting'], 'cancelled', { reason: 'cancelled while starting' });
        await destroy('cancelled while starting', 'cancelled');
        return 'cancelled';
      }
      const running = await deps.store.transition(jobId, ['starting'], 'running', { reason: 'agent alive' });
      if (running.status !== 'ok' && !(running.status === 'noop')) {
        // Timed out or failed meanwhile (reaper, dispatcher): do not dispatch into it.
        await destroy(`job left starting during start (${running.status})`, undefined);
        return 'skipped';
      }
      await addDispatch({ jobId, backend: ref.backend, id: ref.id }, route.notifyStream);
      return 'dispatched';
    };

    const route = await routeFor();
    const { notifyStream } = route;
    let start: SandboxStart = { kind: 'cold', reason: 'no-pools' };
    if (deps.warm && !(deps.redis instanceof Cluster)) {
      const claimStarted = Date.now();
      const warm = await deps.warm.tryClaim({
        jobId,
        tenant: payload.tenant,
        spec: spec.data,
        live: payload.live === true,
        notifyStream,
        ...traceContext,
      });
      if (warm.kind === 'hit') {
        const { ref } = warm;
        await deps.store.setSandbox(jobId, {
          backend: ref.backend,
          id: ref.id,
          member: warm.member.id,
          start: { kind: 'warm' },
        });
        if (unpausable !== undefined) await deps.store.setUnpausable(jobId, unpausable);
        log.info({ sandbox: ref.id, member: warm.member.id }, 'sandbox claimed from a warm pool');
        await recordReach(deps, jobId, ref, {
          backend: ref.backend,
          id: ref.id,
          member: warm.member.id,
          start: { kind: 'warm' },
        });
        // The steps go out while the member binds: they wait in the job's list for its agent.
        const [outcome, bound] = await Promise.all([enterRunning(ref), warm.bound]);
        if (bound) {
          // Counted like any start (start latency, active sandboxes): its destroy counts it down.
          deps.onStarted?.((Date.now() - claimStarted) / 1000, ref.backend);
          return outcome;
        }
        const reason = 'the warm pool member claimed for it did not come up as the job';
        log.warn({ member: warm.member.id }, reason);
        await deps.store.transition(jobId, ['starting', 'running'], 'failed', { reason });
        await destroy(reason, 'failed');
        return 'failed';
      }
      start = { kind: 'cold', reason: warm.reason };
    }
    let credentials: SandboxCredentials | undefined;
    const started = Date.now();
    // Listening before the sandbox exists, so the agent cannot announce itself unheard.
    const announcement = deps.announcements.expect(jobId);
    // An image pull's progress goes on the job's timeline, where a follower of the create sees it.
    const progress = new CreateProgressReporter(
      (p, message) => deps.store.recordProgress(jobId, p, message),
      (err) => log.warn({ err: describe(err) }, 'create progress not recorded'),
    );
    try {
      if (deps.acl) {
        credentials = await deps.acl.create(jobId, notifyStream);
        // Kept so the user can be re-created after a Redis restart (SandboxUserRestorer).
        await saveSandboxUser(deps.redis, deps.keys, jobId, {
          username: credentials.username,
          notifyStream,
          passwordHash: credentials.passwordHash,
        });
      }
      const sandboxAttributes = {
        'sandstream.job.id': jobId,
        'sandstream.sandbox.backend': deps.backend.kind,
        'container.image.name': spec.data.image,
      };
      const ref = await withSpan('sandbox.create', { attributes: sandboxAttributes }, () =>
        deps.backend.create({
          jobId,
          tenant: payload.tenant,
          spec: {
            ...spec.data,
            labels: {
              ...spec.data.labels,
              [SandboxLabels.installation]: deps.installation,
              ...(deps.installationId ? { [SandboxLabels.installationId]: deps.installationId() } : {}),
            },
          },
          agent: {
            redisUrl: urlWithCredentials(route.redisUrl, credentials),
            keyStyle: 'tagged',
            notifyStream,
            ...(payload.live ? { live: true } : {}),
            ...(deps.agentEnv ? { agentEnv: deps.agentEnv } : {}),
          },
          onProgress: progress.report,
        }),
      );
      // Its last progress is on the timeline before the state moves on.
      await progress.flush();
      await deps.store.setSandbox(jobId, { backend: ref.backend, id: ref.id, start });
      if (unpausable !== undefined) await deps.store.setUnpausable(jobId, unpausable);
      // Where the backend can, the files go in while the agent boots (their writes and its boot
      // overlap); a failed wait still lets the restore end before the sandbox is torn down.
      const filesPut = deps.backend.restoresWhileBooting ? putFiles(ref) : undefined;
      filesPut?.catch(() => {});
      const heartbeat = deps.keys.sandbox(jobId).heartbeat;
      const isAgentAlive = async () => (await deps.redis.exists(heartbeat)) === 1;
      await withSpan('sandbox.wait_ready', { attributes: sandboxAttributes }, () =>
        deps.backend.waitReady(ref, spec.data.startDeadlineSeconds * 1000, {
          isAgentAlive,
          // The announcement, or else the heartbeat key once per wait: what an announcement
          // missed during a reconnect of the subscriber still shows.
          agentAnnounced: async (timeoutMs) => (await announcement.next(timeoutMs)) || (await isAgentAlive()),
        }),
      ).catch(async (err) => {
        await filesPut?.catch(() => {});
        throw err;
      });
      const seconds = (Date.now() - started) / 1000;
      deps.onStarted?.(seconds, ref.backend);
      log.info({ sandbox: ref.id, backend: ref.backend, seconds }, 'sandbox ready');
      await recordReach(deps, jobId, ref, { backend: ref.backend, id: ref.id, start });

      return await enterRunning(ref, filesPut);
    } catch (err) {
      const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      const retryable = err instanceof SandboxStartError ? err.capacity : true;
      if (retryable && !lastAttempt) {
        log.warn({ err: describe(err), attempt: job.attemptsMade + 1 }, 'sandbox start failed; will retry');
        await cleanupPartial(deps, jobId);
        throw err;
      }
      const reason =
        err instanceof SandboxStartError
          ? `sandbox did not start (${err.reason}): ${err.message}`
          : `sandbox did not start: ${describe(err)}`;
      log.warn({ reason }, 'sandbox start failed');
      await deps.store.transition(jobId, ['scheduled', 'starting'], 'failed', { reason });
      await destroy(reason, 'failed');
      return 'failed';
    } finally {
      progress.close();
      announcement.close();
    }
  };
}

/**
 * Why a live sandbox of this spec cannot pause where it runs, or undefined: written on its record
 * once it exists, so a pause is refused up front instead of failing the sandbox half-way.
 */
function unpausableReason(deps: StartDeps, spec: SandboxSpec): string | undefined {
  return deps.files ? deps.files.cannotPause(spec) : 'no snapshot store is configured to keep its files';
}

/** Whether a stored live sandbox spec asks its idle limit to pause it. */
function idlePauses(stored: unknown): boolean {
  try {
    const spec = parseStoredSpec(stored);
    return isLiveSandboxSpec(spec) && spec.onIdle === 'pause';
  } catch {
    return false;
  }
}

/**
 * A resumed sandbox: the files it kept at its pause go into its new sandbox before it takes
 * commands. A failure throws: the start is retried, the kept files untouched.
 */
async function restoreKeptFiles(
  deps: StartDeps,
  ref: SandboxRef,
  kept: FetchedKeptFiles | undefined,
): Promise<void> {
  if (!deps.files || !kept)
    throw new Error('resume: this pod-lifecycle has no files keeper (snapshot store) to restore from');
  await deps.files.restore(ref, kept);
}

/**
 * The kept copy goes once the resumed sandbox is up with its files (it holds them now; its next
 * pause keeps them anew).
 */
async function forgetKeptFiles(deps: StartDeps, jobId: string, kept: FetchedKeptFiles): Promise<void> {
  await deps.store.clearPausedFiles(jobId);
  await deps.files
    ?.discard(kept.kept)
    .catch((err) =>
      deps.logger.warn(
        { jobId, err: describe(err) },
        'resume: the kept files were restored but not discarded (the reaper retries)',
      ),
    );
}

async function cleanupPartial(deps: StartDeps, jobId: string): Promise<void> {
  const record = await deps.store.get(jobId);
  if (record?.sandbox) await tearDownPartial(deps, jobId, record.sandbox).catch(() => undefined);
}

/**
 * A sandbox of an earlier attempt goes the one way every sandbox goes (tearDownSandbox), at once:
 * nothing of it is worth waiting for, and the next attempt makes its user and keys afresh. The
 * job's output so far stays, and so do its preview entries (a resumed sandbox's start answers at
 * its URLs). Without a recorded sandbox only its Redis user and footprint go.
 */
async function tearDownPartial(
  deps: StartDeps,
  jobId: string,
  sandbox: JobSandbox | undefined,
): Promise<void> {
  await tearDownSandbox(deps, {
    jobId,
    ref: sandbox ? sandboxRefOf(jobId, sandbox) : undefined,
    member: sandbox?.member,
    graceMs: 0,
    keepOutput: true,
    keepVolumeHolds: true,
    keepPreview: true,
  });
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function startSpanContext(): Pick<DispatchPayload, 'traceContext'> {
  const tc = injectTraceContext();
  return tc ? { traceContext: tc } : {};
}

/**
 * Records where the services reach the sandbox's ports (the preview proxy of services/api reads
 * it from the record): known once the sandbox runs. A backend that cannot say leaves it out,
 * and the proxy answers that the port cannot be reached.
 */
async function recordReach(
  deps: Pick<StartDeps, 'backend' | 'store'>,
  jobId: string,
  ref: SandboxRef,
  sandbox: JobSandbox,
): Promise<void> {
  const address = await deps.backend.portAddress?.(ref, 0).catch(() => undefined);
  if (address) await deps.store.setSandbox(jobId, { ...sandbox, host: address.host });
}
