import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { JobStore } from './job-store.js';
import type { StoredSpec } from './live-sandbox-spec.js';
import { bullJobId, bullPriority, DefaultJobOptions, type JobsPayload } from './queues.js';
import { queueLife } from './sandbox-pause.js';
import { VolumeStore } from './volume-store.js';

export interface SubmitResult {
  jobId: string;
  /** False when a job with this id existed already (nothing new was queued). */
  created: boolean;
}

/**
 * Submits a job or a live sandbox's spec, already parsed (parseJobSpec; the SDK parses once,
 * inside its span): writes the record (SET-NX semantics) and adds it to the `jobs` queue under a
 * BullMQ id derived from the job id. Both halves are idempotent, so a client that retries after a
 * timeout — or crashed between the two writes — makes one job. Live sandboxes go through the
 * same queue, admission and start.
 */
export async function submitParsedJob(
  store: JobStore,
  jobsQueue: Queue,
  submitted: StoredSpec,
): Promise<SubmitResult> {
  let spec = submitted;
  // The volumes' holds come first, under the id the record will have: a refused mount (another
  // writer, an unknown volume) writes nothing, and a crash before the record leaves a hold the
  // next taker or the reaper clears (VolumeStore.clearStale). Not for an id that has a record:
  // either this submit's retry (its holds were taken before the record) or another's id, whose
  // holds are not this submit's to touch.
  if (spec.volumes.length > 0 && (spec.id === undefined || !(await store.get(spec.id)))) {
    if (spec.id === undefined) spec = { ...spec, id: randomUUID() };
    const volumes = new VolumeStore(store.redis, store.keys, store);
    await volumes.acquire(spec.id as string, spec.tenant, spec.volumes);
  }
  const { created, jobId } = await store.create(spec);
  if (!created) {
    // Re-queue only a job still waiting to be scheduled (the first attempt may have died
    // before adding it); the BullMQ id makes a duplicate add a no-op.
    const record = await store.get(jobId);
    if (record?.state !== 'queued') return { jobId, created };
    // A resumed sandbox waiting for its slot: its current life's entry (sandbox-pause.ts).
    if ((record.resumes ?? 0) > 0) {
      await queueLife(store, jobsQueue, jobId, record.resumes ?? 0);
      return { jobId, created };
    }
  }
  const payload: JobsPayload = { jobId, ...(spec.traceContext ? { traceContext: spec.traceContext } : {}) };
  await jobsQueue.add('job', payload, {
    ...DefaultJobOptions,
    jobId: bullJobId(jobId),
    priority: bullPriority(spec.priority),
    attempts: 5,
    backoff: { type: 'exponential', delay: 1000 },
  });
  return { jobId, created };
}
