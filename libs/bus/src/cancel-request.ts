import type { Queue } from 'bullmq';
import type { CancelResult, JobStore } from './job-store.js';
import { bullJobId, type CancelRequestPayload, DefaultJobOptions } from './queues.js';

/**
 * A cancel as a producer (SDK, API) asks for it: recorded on the job (job-store requestCancel,
 * which also ends a job still queued), then, for a job that has or is getting a sandbox, handed
 * to the step-dispatcher as a request on `dispatch-cancel`. The producer knows nothing of the
 * dispatcher's keys or shards; what to signal and when to give up on the agent is the
 * dispatcher's. A scheduled job is ended by pod-lifecycle, which checks the flag before it
 * starts anything.
 */
export async function cancelJob(
  store: JobStore,
  cancelQueue: Queue<CancelRequestPayload>,
  jobId: string,
  reason: string,
): Promise<CancelResult> {
  const result = await store.requestCancel(jobId, reason);
  const pending = result.status === 'requested' || result.status === 'already-requested';
  if (pending && (result.state === 'starting' || result.state === 'running')) {
    // Keyed by the job: repeating a cancel (or retrying after a crash) asks once.
    await cancelQueue.add(
      'cancel',
      { jobId, reason: reason.slice(0, 1024) },
      {
        ...DefaultJobOptions,
        jobId: bullJobId(jobId),
        attempts: 5,
        backoff: { type: 'exponential', delay: 200 },
      },
    );
  }
  return result;
}
