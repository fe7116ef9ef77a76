import { resultKey, StreamLimits, strictObject } from '@sandstream/wire';
import type { Queue } from 'bullmq';
import { z } from 'zod';
import { busLua } from './bus-lua.js';
import type { DispatchKeys } from './dispatch-keys.js';
import { JobField } from './job-layout.js';
import { type JobState, JobStateSchema } from './job-state.js';
import type { JobStore } from './job-store.js';
import { PausedFilesQuota } from './paused-files-quota.js';
import {
  bullJobId,
  bullPriority,
  type CancelRequestPayload,
  DefaultJobOptions,
  type JobsPayload,
} from './queues.js';
import { SANDBOX_PAUSE_MARK } from './sandbox-record.js';

const PAUSE = busLua.load('sandbox-pause');
const RESUME = busLua.load('sandbox-resume');

export type PauseRequestResult =
  /** Asked now, or asked before and still under way; `stopping`: the commands the pause stops. */
  | { status: 'requested'; stopping: string[] }
  | { status: 'paused' }
  | { status: 'missing' }
  /** A close was asked first, or it is not a live sandbox that is ready (queued, creating, ended). */
  | { status: 'refused'; state: JobState; closing: boolean }
  /** Its backend cannot keep its files (pod-lifecycle said why when it started it): nothing changed. */
  | { status: 'unsupported'; reason: string }
  /** Its tenant's snapshot bytes (kept files count) are at SNAPSHOT_MAX_BYTES_PER_TENANT: nothing changed. */
  | { status: 'limit'; message: string };

/**
 * Pauses a ready live sandbox (`sandbox.pause()`, `POST /v1/sandboxes/{id}/pause`). The record
 * is marked in one script (from then on every command is refused, never taken and killed), and
 * the rest is the step-dispatcher's, as a close is: it stops the commands still running, ends
 * the sandbox's life `paused` (its slot goes back), and pod-lifecycle's destroy keeps the files
 * before the sandbox goes (tearDownSandbox with `keepFiles`). Idempotent: repeating it while the
 * pause is under way asks once. `tenant`: only that tenant's sandbox (another's is `missing`).
 */
export async function requestPause(
  store: JobStore,
  cancelQueue: Queue<CancelRequestPayload>,
  jobId: string,
  tenant = '',
): Promise<PauseRequestResult> {
  const refused = await quotaRefusal(store, jobId);
  if (refused) return { status: 'limit', message: refused.message };
  const reply = await PAUSE.run<(string | number)[]>(
    store.redis,
    [store.keys.job(jobId)],
    [tenant, SANDBOX_PAUSE_MARK, resultKey(store.keys.sandbox(jobId), '')],
  );
  const [status, second] = reply;
  if (status === 'missing' || status === 'not-sandbox') return { status: 'missing' };
  if (status === 'paused') return { status: 'paused' };
  if (status === 'unpausable') return { status: 'unsupported', reason: String(second) };
  if (status === 'closing' || status === 'not-ready')
    return { status: 'refused', state: JobStateSchema.parse(second), closing: status === 'closing' };
  const resumes = Number(second);
  const stopping = reply.slice(2).map(String);
  if (status === 'requested') await store.publishChange({ jobId, what: 'pausing' });
  // One request per life of the sandbox: a repeat (or a retry after a crash) asks once.
  await cancelQueue.add(
    'pause',
    { jobId, reason: SANDBOX_PAUSE_MARK, pause: true },
    {
      ...DefaultJobOptions,
      jobId: `${bullJobId(jobId, resumes)}%p`,
      attempts: 5,
      backoff: { type: 'exponential', delay: 200 },
    },
  );
  return { status: 'requested', stopping };
}

/**
 * A first pause request of a running sandbox whose tenant is at its snapshot byte quota: refused
 * before anything stops (its kept files would count in it). Not atomic with the pause script: a
 * pause racing another may take the tenant past the limit, and is counted, never dropped.
 */
async function quotaRefusal(store: JobStore, jobId: string) {
  const [tenant, state, closing] = await store.redis.hmget(
    store.keys.job(jobId),
    JobField.tenant,
    JobField.state,
    JobField.closing,
  );
  if (state !== 'running' || closing !== null) return undefined;
  return new PausedFilesQuota(store.redis, store.keys).pauseRefusal(tenant ?? 'default');
}

export type ResumeResult =
  | { status: 'resumed'; resumes: number }
  | { status: 'missing' }
  /** Not paused (any other state), or closed while paused. */
  | { status: 'not-paused'; state: JobState | 'closing' }
  /** Paused, but its files are still being kept and its sandbox torn down: ask again once paused. */
  | { status: 'pausing' };

/**
 * Resumes a paused sandbox: back to `queued` under the same id, queued on `jobs` like a new one
 * (admission, a cold or warm start), under BullMQ ids of its new life; pod-lifecycle puts its
 * kept files back before the dispatcher opens it for commands.
 */
export async function resumeSandbox(
  store: JobStore,
  jobsQueue: Queue<JobsPayload>,
  dispatchKeys: DispatchKeys,
  jobId: string,
  tenant = '',
): Promise<ResumeResult> {
  const now = Date.now();
  const reply = await RESUME.run<(string | number)[]>(
    store.redis,
    [store.keys.job(jobId), store.keys.sandbox(jobId).events, dispatchKeys.dispatchState(jobId)],
    [tenant, now, StreamLimits.eventStreamMaxLength],
  );
  const [status, second, json] = reply;
  if (status === 'missing' || status === 'not-sandbox') return { status: 'missing' };
  if (status === 'closing') return { status: 'not-paused', state: 'closing' };
  if (status === 'pausing') return { status: 'pausing' };
  if (status === 'not-paused') return { status: 'not-paused', state: JobStateSchema.parse(second) };
  const resumes = Number(second);
  await store.indexTransition(jobId, 'paused', 'queued', now, String(json));
  await queueLife(store, jobsQueue, jobId, resumes);
  return { status: 'resumed', resumes };
}

/**
 * Queues a resumed sandbox on `jobs` (also what a repeated resume does for a sandbox still
 * queued: the first may have died between its two writes; the BullMQ id makes it once).
 */
export async function queueLife(
  store: JobStore,
  jobsQueue: Queue<JobsPayload>,
  jobId: string,
  resumes: number,
): Promise<void> {
  const spec = await store.getSpec(jobId);
  await jobsQueue.add(
    'job',
    { jobId },
    {
      ...DefaultJobOptions,
      jobId: bullJobId(jobId, resumes),
      priority: bullPriority(spec?.priority ?? 50),
      attempts: 5,
      backoff: { type: 'exponential', delay: 1000 },
    },
  );
}

/**
 * Why `pause({ memory: true })` is refused: a memory checkpoint needs gVisor's own network stack,
 * which this deployment's runsc runtime cannot use (docs/live-sandboxes.md, "Pause").
 */
export const MEMORY_PAUSE_UNSUPPORTED =
  'memory: a memory pause (keeping processes and their memory) is not available: it needs a gVisor (runsc) ' +
  "checkpoint, and runsc as this deployment runs it (host networking, --network=host) fails with 'checkpoint " +
  'not supported when using hostinet\'; pause() keeps the files only (docs/live-sandboxes.md, "Pause")';

/** `pause(options)` as the SDK and `POST /v1/sandboxes/{id}/pause` take them (strict). */
export const SandboxPauseOptionsSchema = strictObject({
  /** Keep running processes and their memory too: refused here (MEMORY_PAUSE_UNSUPPORTED). */
  memory: z
    .boolean()
    .optional()
    .refine((memory) => memory !== true, MEMORY_PAUSE_UNSUPPORTED),
});
export type SandboxPauseOptions = z.input<typeof SandboxPauseOptionsSchema>;
