import {
  isTerminal,
  type JobStore,
  type KeySpace,
  type LeaseRenewal,
  type RedisClient,
  type SandboxAcl,
  type SandboxDestroyPayload,
  SandboxDestroyPayloadSchema,
  sandboxRefOf,
  tearDownSandbox,
  type WarmPoolStore,
} from '@sandstream/bus';
import type { SandboxBackend } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import { formatIssues } from '@sandstream/wire';
import type { Job } from 'bullmq';

export interface DestroyDeps {
  store: JobStore;
  leases: LeaseRenewal;
  redis: RedisClient;
  keys: KeySpace;
  backend: SandboxBackend;
  acl: SandboxAcl | null;
  graceMs: number;
  logger: Logger;
  onDestroyed?: (backend: string) => void;
  /** Warm pools: a claimed member's record goes with its sandbox. */
  pools?: WarmPoolStore;
}

/**
 * The `sandbox-destroy` processor. Every step is idempotent, so a retried or duplicated
 * destroy converges: the job ends in a terminal state, its slot lease is freed, the backend's
 * destroy (shutdown step, grace, kill, remove) runs, and the sandbox's Redis user and everything
 * it stored go (tearDownSandbox, libs/bus: its footprint, in every database). The job record and
 * its events stream stay for the reaper's retention, so clients can still read the outcome and
 * the output.
 *
 * The slot goes back as soon as the job is terminal, not after the destroy: a waiting job
 * should not wait for a container removal or a grace period of a job that has finished (the
 * step-dispatcher frees it even earlier, when it ends the job; this covers every other way a
 * job ends). The sandbox being torn down is then outside the limit for as long as the destroy
 * takes, which pod-lifecycle bounds by keeping the grace below the lease length.
 */
export function createDestroyProcessor(deps: DestroyDeps) {
  return async (job: Job): Promise<'destroyed' | 'skipped'> => {
    const parsed = SandboxDestroyPayloadSchema.safeParse(job.data);
    if (!parsed.success) {
      deps.logger.error(
        { bullJobId: job.id, problems: formatIssues(parsed.error) },
        'malformed sandbox-destroy payload',
      );
      return 'skipped';
    }
    await destroySandbox(deps, parsed.data);
    return 'destroyed';
  };
}

/**
 * One destroy of a job's sandbox, as the processor runs it; also the run teardown's
 * (run-teardown.ts). The sandbox itself goes through tearDownSandbox, as every other path's does.
 */
export async function destroySandbox(
  deps: DestroyDeps,
  { jobId, reason, outcome }: Pick<SandboxDestroyPayload, 'jobId' | 'reason' | 'outcome'>,
): Promise<void> {
  const log = deps.logger.child({ jobId });
  const record = await deps.store.get(jobId);

  if (record && !isTerminal(record.state)) {
    // Whoever asked for the destroy should have ended the job; make sure it does not linger.
    const to = outcome && isTerminal(outcome) ? outcome : 'failed';
    await deps.store.transition(jobId, ['queued', 'scheduled', 'starting', 'running'], to, {
      reason: `sandbox destroyed: ${reason}`,
    });
  }
  // Idempotent (a ZREM): a redelivered destroy, or the dispatcher having freed it first, is a
  // no-op that wakes nobody. A crash before it leaves the lease to lapse (not renewed: the job
  // is terminal) and the reaper to reclaim.
  if (record) await deps.leases.release(jobId, record.tenant);
  const sandbox = record?.sandbox;
  await tearDownSandbox(deps, {
    jobId,
    ref: sandbox ? sandboxRefOf(jobId, sandbox) : undefined,
    member: sandbox?.member,
    graceMs: deps.graceMs,
    keepOutput: true,
  });
  if (sandbox) deps.onDestroyed?.(sandbox.backend);
  log.info({ reason, sandbox: record?.sandbox?.id }, 'sandbox destroyed');
}
