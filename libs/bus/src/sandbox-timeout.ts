import { strictObject } from '@sandstream/wire';
import type { Queue } from 'bullmq';
import { z } from 'zod';
import { busLua } from './bus-lua.js';
import type { JobState } from './job-state.js';
import { JobStateSchema } from './job-state.js';
import type { JobStore } from './job-store.js';
import { bullJobId, type CancelRequestPayload, DefaultJobOptions } from './queues.js';

const SET_TIMEOUT = busLua.load('sandbox-set-timeout');

/**
 * The longest setTimeout asked for: the step-dispatcher's own bound on an operator's maximum
 * lifetime (SANDBOX_MAX_LIFETIME_SECONDS); the operator's cap then applies below it.
 */
export const SANDBOX_TIMEOUT_MAX_SECONDS = 7 * 24 * 3600;

/** `setTimeout(seconds)` as the SDK and `POST /v1/sandboxes/{id}/timeout` take it (strict). */
export const SandboxSetTimeoutSchema = strictObject({
  /** It ends this many seconds after the call (whole seconds, 1 … 7 days). */
  timeoutSeconds: z
    .number()
    .int('timeoutSeconds must be a whole number of seconds')
    .min(1, 'timeoutSeconds is at least 1')
    .max(SANDBOX_TIMEOUT_MAX_SECONDS, `timeoutSeconds is at most ${SANDBOX_TIMEOUT_MAX_SECONDS} (7 days)`),
});

export type SetTimeoutResult =
  /** Its new end (epoch ms); `capped` when the operator's maximum lifetime cut what was asked. */
  | { status: 'set'; endsAt: number; capped: boolean }
  | { status: 'missing' }
  /** Not ready (still creating, paused) or closing: it has no lifetime to move. */
  | { status: 'refused'; state: JobState; closing: boolean };

/**
 * A client's setTimeout of a live sandbox (E2B's meaning): it now ends `seconds` after this
 * call, whether that is sooner or later than before, capped at the operator's maximum lifetime.
 * The end is written on the record at once (what a lifetime deadline that comes early checks),
 * then the step-dispatcher is asked, on `dispatch-cancel`, to move its deadline there: the
 * producer knows nothing of the dispatcher's keys or shards, as for a cancel.
 */
export async function setSandboxTimeout(
  store: JobStore,
  cancelQueue: Queue<CancelRequestPayload>,
  jobId: string,
  seconds: number,
  tenant = '',
): Promise<SetTimeoutResult> {
  const reply = await SET_TIMEOUT.run<(string | number)[]>(
    store.redis,
    [store.keys.job(jobId)],
    [tenant, Math.round(seconds * 1000)],
  );
  const [status, second, third, fourth] = reply;
  if (status === 'missing') return { status: 'missing' };
  if (status === 'closing' || status === 'not-ready')
    return { status: 'refused', state: JobStateSchema.parse(second), closing: status === 'closing' };
  const endsAt = Number(second);
  await cancelQueue.add(
    'lifetime',
    { jobId, reason: 'set-timeout', lifetime: true },
    {
      ...DefaultJobOptions,
      // One request per new end: a repeat of the same end asks once, another end asks again.
      jobId: `${bullJobId(jobId, Number(third))}%t${endsAt}`,
      attempts: 5,
      backoff: { type: 'exponential', delay: 200 },
    },
  );
  return { status: 'set', endsAt, capped: Number(fourth) === 1 };
}
