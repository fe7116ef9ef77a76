import type { Queue } from 'bullmq';
import { bullJobId, DefaultJobOptions, type SandboxDestroyPayload } from './queues.js';

/**
 * Asks pod-lifecycle to tear a job's sandbox down: the one way every service does it, with one
 * policy.
 * - BullMQ job id = the job's: a destroy already waiting or running for the job absorbs a
 *   duplicate (a redelivered message repeating what it did before a crash).
 * - removeOnComplete: a finished destroy leaves no entry behind that would swallow a later one
 *   (a sandbox created after it — a start that raced the end of its job — still gets destroyed).
 *   A destroy that failed all its attempts stays in the failed history for operators; that
 *   sandbox is the reaper's (orphan pass).
 * - 10 attempts with exponential backoff: a backend or Redis blip must not leak a sandbox.
 */
export async function enqueueDestroy(queue: Queue, payload: SandboxDestroyPayload): Promise<void> {
  await queue.add('destroy', payload, {
    ...DefaultJobOptions,
    removeOnComplete: true,
    jobId: bullJobId(payload.jobId),
    attempts: 10,
    backoff: { type: 'exponential', delay: 1000 },
  });
}
