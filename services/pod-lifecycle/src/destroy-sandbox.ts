import {
  isTerminal,
  type JobStore,
  type KeySpace,
  type LeaseRenewal,
  type RedisClient,
  type SandboxAcl,
  type SandboxDestroyPayload,
  SandboxDestroyPayloadSchema,
  type SandboxFilesKeeper,
  sandboxRefOf,
  TEARDOWN_CLAIM_MS,
  tearDownSandbox,
  teardownClaimKey,
  type WarmPoolStore,
} from '@sandstream/bus';
import type { SandboxBackend } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import { formatIssues, resultKey } from '@sandstream/wire';
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
  /** Keeps a pausing sandbox's files (the snapshots' capture and store); without it a pause fails the sandbox. */
  files?: SandboxFilesKeeper | undefined;
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
  let record = await deps.store.get(jobId);
  if (record?.state === 'paused' && record.cancelRequested === undefined && record.sandbox) {
    // A pause: the same teardown, keeping its files first (tearDownSandbox's keepFiles).
    if (await pauseTeardown(deps, jobId, record)) {
      log.info({ reason, sandbox: record.sandbox.id }, 'sandbox paused: files kept, sandbox destroyed');
      return;
    }
    record = await deps.store.get(jobId);
  }

  if (record && !isTerminal(record.state)) {
    // Whoever asked for the destroy should have ended the job; make sure it does not linger.
    const to = outcome && isTerminal(outcome) ? outcome : 'failed';
    await deps.store.transition(jobId, ['queued', 'scheduled', 'starting', 'running', 'paused'], to, {
      reason: `sandbox destroyed: ${reason}`,
    });
  }
  // Idempotent (a ZREM): a redelivered destroy, or the dispatcher having freed it first, is a
  // no-op that wakes nobody. A crash before it leaves the lease to lapse (not renewed: the job
  // is terminal) and the reaper to reclaim.
  if (record) await deps.leases.release(jobId, record.tenant);
  const sandbox = record?.sandbox;
  const ref = sandbox ? sandboxRefOf(jobId, sandbox) : undefined;
  if (ref) {
    // Taken, not tried: this destroy is the sandbox's owner and always tears down (a reaper that
    // was first does no harm, the teardown is idempotent); a reaper that comes later sees the
    // claim and leaves the sandbox to us.
    await deps.redis.set(
      teardownClaimKey(deps.keys, ref.jobId),
      'pod-lifecycle',
      'PX',
      deps.graceMs + TEARDOWN_CLAIM_MS,
    );
  }
  await tearDownSandbox(deps, {
    jobId,
    ref,
    member: sandbox?.member,
    graceMs: deps.graceMs,
    keepOutput: true,
  });
  if (sandbox) deps.onDestroyed?.(sandbox.backend);
  log.info({ reason, sandbox: record?.sandbox?.id }, 'sandbox destroyed');
}

/** How long a pause waits for the commands it stopped to answer before it captures anyway. */
const DRAIN_LIMIT_MS = 10_000;

/**
 * Before the capture, every command the pause stopped has answered (its result key SET by the
 * agent: cancelled, or done if it could not be stopped, as a file write finishing its rename).
 * A write whose caller was told it succeeded is then on disk before the capture starts, whatever
 * the backend freezes (the in-process freeze stops the agent's children, not the agent that
 * writes files). A command that does not answer in DRAIN_LIMIT_MS is captured as it is.
 */
async function drainCommands(deps: DestroyDeps, jobId: string): Promise<void> {
  const deadline = Date.now() + DRAIN_LIMIT_MS;
  for (let wait = 10; ; wait = Math.min(wait * 2, 200)) {
    const record = await deps.store.get(jobId);
    const open = Object.keys(record?.commands ?? {}).filter((id) => !(id in (record?.stepResults ?? {})));
    const keys = deps.keys.sandbox(jobId);
    const answered = await Promise.all(open.map((id) => deps.redis.exists(resultKey(keys, id))));
    const left = open.filter((_, i) => answered[i] === 0);
    if (left.length === 0) return;
    if (Date.now() > deadline) {
      deps.logger.warn(
        { jobId, commands: left },
        'pause: commands did not answer the stop; capturing as they are',
      );
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}

/** Tries at keeping a pausing sandbox's files before it fails instead. */
const KEEP_ATTEMPTS = 3;

/**
 * A paused sandbox's teardown: its files are kept (and the reference recorded on its record)
 * before anything of it goes, then it goes as any sandbox does, and its record forgets where it
 * ran. False when its files cannot be kept: the caller then fails it (a pause that cannot keep
 * the files must not pretend it did). A redelivered destroy that finds the files kept already
 * does not keep them twice.
 */
async function pauseTeardown(
  deps: DestroyDeps,
  jobId: string,
  record: NonNullable<Awaited<ReturnType<JobStore['get']>>>,
): Promise<boolean> {
  const sandbox = record.sandbox;
  if (!sandbox) return false;
  const files = deps.files;
  if (!files) {
    deps.logger.error(
      { jobId },
      'pause: this pod-lifecycle has no files keeper (snapshot store); the sandbox fails',
    );
    await deps.store.transition(jobId, ['paused'], 'failed', {
      reason: 'pause failed: no snapshot store is configured to keep its files',
    });
    return false;
  }
  // Its slot went back when the dispatcher paused it; again here, idempotent, as any destroy does.
  await deps.leases.release(jobId, record.tenant);
  /** Keeps the files, the reference on the record before anything of the sandbox goes. */
  const keepFiles = async (ref: { jobId: string; backend: string; id: string }) => {
    // A redelivered destroy finds them kept already and does not keep them twice.
    if (record.pausedFiles !== undefined) return;
    await drainCommands(deps, jobId);
    for (let attempt = 1; ; attempt++) {
      try {
        await deps.store.setPausedFiles(
          jobId,
          await files.keep(ref, { sandboxId: jobId, tenant: record.tenant }),
        );
        return;
      } catch (err) {
        if (attempt >= KEEP_ATTEMPTS) throw err;
        deps.logger.warn(
          { jobId, err: describe(err), attempt },
          'pause: keeping the files failed; trying again',
        );
        await new Promise((resolve) => setTimeout(resolve, 1000 * attempt));
      }
    }
  };
  try {
    await tearDownSandbox(deps, {
      jobId,
      ref: sandboxRefOf(jobId, sandbox),
      member: sandbox.member,
      graceMs: deps.graceMs,
      keepOutput: true,
      keepFiles,
    });
  } catch (err) {
    if ((await deps.store.get(jobId))?.pausedFiles !== undefined) throw err; // kept: the rest is retried
    // Honest over lossless-looking: the sandbox fails, saying why, and goes as a failed one does.
    deps.logger.error({ jobId, err: describe(err) }, 'pause: its files could not be kept; the sandbox fails');
    await deps.store.transition(jobId, ['paused'], 'failed', {
      reason: `pause failed: its files could not be kept: ${describe(err)}`.slice(0, 2048),
    });
    return false;
  }
  await deps.store.clearSandbox(jobId);
  if (sandbox) deps.onDestroyed?.(sandbox.backend);
  return true;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
