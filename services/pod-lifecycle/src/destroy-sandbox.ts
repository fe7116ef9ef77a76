import {
  freeSandboxKeys,
  isTerminal,
  type JobStore,
  type KeySpace,
  type LeaseRenewal,
  type RedisClient,
  type SandboxAcl,
  type SandboxDestroyPayload,
  SandboxDestroyPayloadSchema,
  sandboxRefOf,
  type WarmPoolStore,
} from '@sandstream/bus';
import { requestAgentShutdown, type SandboxBackend } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import { formatIssues, StreamLimits } from '@sandstream/wire';
import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';

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

/** The claimed member's record and its (already unused) Redis user. */
async function forgetMember(deps: DestroyDeps, memberId: string): Promise<void> {
  const member = await deps.pools?.get(memberId);
  if (member) await deps.pools?.remove(member);
  if (deps.acl) await deps.acl.delete(memberId);
}

/**
 * What the sandbox stored goes with it, whatever its budget said while it ran: steps, control and
 * heartbeat (a shutdown step nobody popped must not reach a future sandbox of the same job id),
 * and every key it made under its prefix, in any database. Its events stream stays, cut to the
 * length the agent and the services write it at (so only what a sandbox added past that goes).
 * The `results` list goes too: under the services results travel in per-step keys the
 * dispatcher takes, and the list is only a standalone agent's (seed 000).
 */
async function freeStoredKeys(deps: DestroyDeps, jobId: string): Promise<void> {
  const { events } = deps.keys.sandbox(jobId);
  await freeSandboxKeys(deps.redis, deps.keys, jobId, { keep: [events] });
  await deps.redis
    .xtrim(events, 'MAXLEN', '~', StreamLimits.eventStreamMaxLength)
    .catch(async (err: Error) => {
      // Not a stream (the sandbox wrote something else there): no output of the job's, so it goes;
      // throwing would fail every retry of this destroy.
      if (!err.message.startsWith('WRONGTYPE')) throw err;
      await deps.redis.unlink(events);
    });
}

/**
 * The `sandbox-destroy` processor. Every step is idempotent, so a retried or duplicated
 * destroy converges: the job ends in a terminal state, its slot lease is freed, the backend's
 * destroy (shutdown step, grace, kill, remove) runs, and the sandbox's Redis user and everything
 * it stored go (freeSandboxKeys: every key of its pattern, in every database). The job record and
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

/** One destroy, as the processor runs it; also the run teardown's (run-teardown.ts). */
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
  if (record?.sandbox) {
    const { member } = record.sandbox;
    // A claimed member's agent reads the job's keys, not the member's the backend knows of:
    // ask it to leave there, so the backend's grace ends when it has.
    if (member) await requestAgentShutdown(deps.redis as Redis, jobId, 'tagged');
    await deps.backend.destroy(sandboxRefOf(jobId, record.sandbox), { graceMs: deps.graceMs });
    if (member) await forgetMember(deps, member);
    deps.onDestroyed?.(record.sandbox.backend);
  }
  if (deps.acl) await deps.acl.delete(jobId);
  await freeStoredKeys(deps, jobId);
  log.info({ reason, sandbox: record?.sandbox?.id }, 'sandbox destroyed');
}
