import { type JobStore, JobsPayloadSchema, type SlotAdmission } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { Job } from 'bullmq';

export interface AdmissionFailureDeps {
  store: JobStore;
  leases: SlotAdmission;
  logger: Logger;
}

/**
 * BullMQ gives up on a `jobs` entry after its last attempt (Redis errors, a template source
 * that keeps throwing); without this the job's record would stay `queued` forever. Called from
 * the worker's `failed` event: after the final attempt the job ends `failed` with the last
 * error as its reason, and any slot it took is given back. Returns true when it ended the job.
 */
export async function failExhaustedAdmission(
  deps: AdmissionFailureDeps,
  job: Job | undefined,
  err: Error,
): Promise<boolean> {
  if (!job || job.attemptsMade < (job.opts.attempts ?? 1)) return false;
  const payload = JobsPayloadSchema.safeParse(job.data);
  if (!payload.success) return false;
  const { jobId } = payload.data;
  const reason = `admission failed after ${job.attemptsMade} attempts: ${err.message}`;
  const result = await deps.store.transition(jobId, ['queued', 'scheduled'], 'failed', { reason });
  const record = await deps.store.get(jobId);
  if (record) await deps.leases.release(jobId, record.tenant);
  if (result.status === 'ok') deps.logger.error({ jobId, reason }, 'job failed: admission gave up');
  return result.status === 'ok';
}
