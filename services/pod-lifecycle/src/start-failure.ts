import { enqueueDestroy, type JobStore, SandboxCreatePayloadSchema } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { Job, Queue } from 'bullmq';

export interface StartFailureDeps {
  store: JobStore;
  destroyQueue: Queue;
  logger: Logger;
}

/**
 * The start processor ends a job itself when a start fails for good; this covers the rest —
 * an error before it got that far (Redis unreachable on every attempt), or a stalled job
 * BullMQ stopped retrying. After the final attempt the job ends `failed` with the last error,
 * and a destroy is queued, which removes whatever was half-created and frees the slot.
 */
export async function failExhaustedStart(
  deps: StartFailureDeps,
  job: Job | undefined,
  err: Error,
): Promise<boolean> {
  if (!job || job.attemptsMade < (job.opts.attempts ?? 1)) return false;
  const payload = SandboxCreatePayloadSchema.safeParse(job.data);
  if (!payload.success) return false;
  const { jobId } = payload.data;
  const reason = `sandbox start failed after ${job.attemptsMade} attempts: ${err.message}`;
  const result = await deps.store.transition(jobId, ['scheduled', 'starting'], 'failed', { reason });
  if (result.status !== 'ok') return false;
  await enqueueDestroy(deps.destroyQueue, { jobId, reason, outcome: 'failed' });
  deps.logger.error({ jobId, reason }, 'job failed: sandbox start gave up');
  return true;
}
