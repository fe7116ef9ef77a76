import {
  bullJobId,
  bullPriority,
  DefaultJobOptions,
  isLiveSandboxSpec,
  isTerminal,
  JobSpecError,
  type JobStore,
  JobsPayloadSchema,
  type KeySpace,
  type RedisClient,
  type SandboxCreatePayload,
  type SlotAdmission,
  VolumeNotFoundError,
  VolumeStore,
  waitingRank,
} from '@sandstream/bus';
import { injectTraceContext, type Logger } from '@sandstream/telemetry';
import { formatIssues } from '@sandstream/wire';
import { DelayedError, type Job, type Queue } from 'bullmq';
import { TemplateResolutionError, type TemplateResolver } from './template-resolver.js';

export interface ScheduleDeps {
  store: JobStore;
  leases: SlotAdmission;
  redis: RedisClient;
  keys: KeySpace;
  createQueue: Queue;
  resolver: TemplateResolver;
  logger: Logger;
  /** Safety net: a waiting job is re-checked this often even without a wake-up. */
  recheckMs: number;
}

export type ScheduleOutcome =
  | 'scheduled'
  | 'rejected'
  | 'cancelled'
  | 'skipped'
  | { waiting: 'global' | 'tenant' };

/**
 * The `jobs` queue processor. Admission order:
 * 1. the record still wants scheduling (queued, or scheduled after a crash mid-way);
 * 2. the spec re-validates (the record crossed a trust boundary);
 * 3. a global and a tenant slot lease is taken atomically; if not, the job parks in BullMQ's
 *    delayed set and registers in the waiting set, and a capacity wake-up promotes it;
 * 4. the template resolves; queued -> scheduled; `sandbox-create` is enqueued.
 * Every step is idempotent, so a redelivered job (stalled worker, crash) converges.
 */
export function createScheduleProcessor(deps: ScheduleDeps) {
  const admit = admitOnce(deps);
  return async (job: Job, token?: string): Promise<ScheduleOutcome> => {
    const outcome = await admit(job, token); // a job that must wait leaves by DelayedError instead
    const jobId = (job.data as { jobId?: unknown } | undefined)?.jobId;
    // Whatever the outcome, the job no longer waits for capacity: a stale waiting entry would
    // take a wake-up meant for a job that does.
    if (typeof jobId === 'string') await deps.redis.zrem(deps.keys.capacityWaiting, jobId);
    return outcome;
  };
}

function admitOnce(deps: ScheduleDeps) {
  return async (job: Job, token?: string): Promise<ScheduleOutcome> => {
    const payload = JobsPayloadSchema.safeParse(job.data);
    if (!payload.success) {
      deps.logger.error(
        { bullJobId: job.id, problems: formatIssues(payload.error) },
        'malformed jobs payload',
      );
      return 'skipped';
    }
    const { jobId } = payload.data;
    const log = deps.logger.child({ jobId });
    const record = await deps.store.get(jobId);
    if (!record) {
      log.warn('job record missing; dropping');
      return 'skipped';
    }
    if (record.state !== 'queued' && record.state !== 'scheduled') {
      log.info({ state: record.state }, 'job no longer waits for scheduling');
      // A slot the capacity waker reserved for it while it waited, if any: idempotent, and a
      // finished job holds no slot it still needs.
      if (isTerminal(record.state)) await deps.leases.release(jobId, record.tenant);
      return 'skipped';
    }
    if (record.cancelRequested !== undefined) {
      await deps.store.transition(jobId, ['queued', 'scheduled'], 'cancelled', {
        reason: record.cancelRequested,
      });
      await deps.leases.release(jobId, record.tenant);
      return 'cancelled';
    }

    let spec: Awaited<ReturnType<JobStore['getSpec']>>;
    try {
      spec = await deps.store.getSpec(jobId);
    } catch (err) {
      const reason = err instanceof JobSpecError ? err.message : `stored spec unreadable: ${String(err)}`;
      await deps.store.transition(jobId, ['queued', 'scheduled'], 'failed', { reason });
      log.warn({ reason }, 'rejected job');
      return 'rejected';
    }
    if (!spec) return 'skipped';

    let lease = await deps.leases.acquire(jobId, record.tenant);
    if (!lease.granted) {
      // Register as a waiter, then try once more: a slot freed between the first attempt and
      // the registration would otherwise wake nobody and leave the job to the safety re-check.
      await deps.redis.zadd(
        deps.keys.capacityWaiting,
        'NX',
        waitingRank(spec.priority, record.createdAt),
        jobId,
      );
      lease = await deps.leases.acquire(jobId, record.tenant);
    }
    if (!lease.granted) {
      log.info({ blockedBy: lease.blockedBy, tenant: record.tenant }, 'no capacity; job waits');
      await job.moveToDelayed(Date.now() + deps.recheckMs, token);
      // The waker may have reserved a slot for this job between the acquire above and parking,
      // and found it still running, so not promoted it: without this it would sit in the
      // delayed set with its slot until the re-check.
      if (await deps.leases.holds(jobId)) await job.promote().catch(() => undefined);
      throw new DelayedError();
    }
    await deps.redis.zrem(deps.keys.capacityWaiting, jobId);

    let resolved: Awaited<ReturnType<TemplateResolver['resolve']>>;
    try {
      resolved = await deps.resolver.resolve(spec);
      // The volumes' backend objects, by the records the submit's holds were taken against
      // (a held volume cannot be deleted, so a record missing here was never held).
      if (spec.volumes.length > 0) {
        resolved.sandbox.volumes = await new VolumeStore(deps.redis, deps.keys).resolveMounts(
          spec.tenant,
          spec.volumes,
        );
      }
    } catch (err) {
      if (!(err instanceof TemplateResolutionError) && !(err instanceof VolumeNotFoundError)) {
        await deps.leases.release(jobId, record.tenant);
        throw err;
      }
      await deps.store.transition(jobId, ['queued', 'scheduled'], 'failed', { reason: err.message });
      await deps.leases.release(jobId, record.tenant);
      log.warn({ reason: err.message }, 'template resolution failed');
      return 'rejected';
    }

    const moved = await deps.store.transition(jobId, ['queued'], 'scheduled');
    const nowScheduled = moved.status === 'ok' || (moved.status === 'noop' && moved.state === 'scheduled');
    const alreadyScheduled = moved.status === 'conflict' && moved.state === 'scheduled';
    if (!nowScheduled && !alreadyScheduled) {
      // Cancelled or failed meanwhile: give the slot back.
      await deps.leases.release(jobId, record.tenant);
      log.info({ result: moved }, 'job changed state during admission; slot released');
      return 'skipped';
    }

    const createPayload: SandboxCreatePayload = {
      jobId,
      tenant: record.tenant,
      sandbox: resolved.sandbox,
      ...(resolved.template ? { template: resolved.template } : {}),
      ...(isLiveSandboxSpec(spec) ? { live: true } : {}),
      ...(payload.data.traceContext ? { traceContext: payload.data.traceContext } : {}),
      // The next hop is a child of this admission span (not of submit), so the trace reads
      // submit -> scheduler -> pod-lifecycle; telemetry off keeps the submitter's context.
      ...traceContextOf(injectTraceContext()),
    };
    await deps.createQueue.add('create', createPayload, {
      ...DefaultJobOptions,
      jobId: bullJobId(jobId, record.resumes),
      priority: bullPriority(spec.priority),
      // Transient errors (Redis blip, backend API hiccup) retry; capacity errors retry longer.
      attempts: 6,
      backoff: { type: 'exponential', delay: 2000 },
    });
    log.info({ tenant: record.tenant, image: resolved.sandbox.image }, 'job scheduled');
    return 'scheduled';
  };
}

function traceContextOf(tc: ReturnType<typeof injectTraceContext>) {
  return tc ? { traceContext: tc } : {};
}
