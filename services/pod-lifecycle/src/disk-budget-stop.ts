import { enqueueDestroy, type JobStore } from '@sandstream/bus';
import { DiskBudgetWatch, type SandboxBackend, SandboxLabels } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';
import type { Queue } from 'bullmq';

export interface DiskBudgetStopOptions {
  backend: SandboxBackend;
  store: Pick<JobStore, 'transition' | 'recordDisk'>;
  destroyQueue: Queue;
  /** Only this installation's sandboxes: an engine may be shared with another installation. */
  installation: string;
  /** This Redis's installation id (InstallationIdentity): a shared name alone is not enough. */
  installationId: () => string;
  intervalMs: number;
  /** Longest pause while no sandbox runs (DiskBudgetWatch backs off up to it). */
  idleMaxMs?: number;
  logger: Logger;
}

/**
 * The disk budget of the backends whose engine does not enforce one (Docker without a storage
 * quota, in-process): pod-lifecycle owns the backend, so it measures and halts. The job fails
 * with reason `disk-budget: …` first (so the dispatcher, seeing its agent gone, finds it ended),
 * then the usual destroy removes the sandbox and its bytes.
 */
export function createDiskBudgetStop(options: DiskBudgetStopOptions): DiskBudgetWatch {
  const { backend, store, destroyQueue, installation, installationId, logger } = options;
  const ours: SandboxBackend = {
    kind: backend.kind,
    create: (r) => backend.create(r),
    waitReady: (r, d, o) => backend.waitReady(r, d, o),
    destroy: (r, o) => backend.destroy(r, o),
    close: () => backend.close(),
    list: async () =>
      (await backend.list()).filter(
        (s) =>
          s.labels[SandboxLabels.installation] === installation &&
          s.labels[SandboxLabels.installationId] === installationId(),
      ),
    ...(backend.diskUsage ? { diskUsage: (r) => backend.diskUsage!(r) } : {}),
    ...(backend.halt ? { halt: (r) => backend.halt!(r) } : {}),
  };
  return new DiskBudgetWatch({
    backend: ours,
    intervalMs: options.intervalMs,
    ...(options.idleMaxMs !== undefined ? { idleMaxMs: options.idleMaxMs } : {}),
    // For stats(): a write per sandbox per round, on a field of its own record.
    onMeasured: (ref, usage) => {
      const disk = { usedBytes: usage.usedBytes, limitBytes: usage.limitBytes, measuredAt: Date.now() };
      store.recordDisk(ref.jobId, disk).catch((err: unknown) => {
        logger.warn({ err, jobId: ref.jobId }, 'could not record disk use');
      });
    },
    onOverBudget: async (ref, usage, reason) => {
      logger.warn(
        { jobId: ref.jobId, usedBytes: usage.usedBytes, limitBytes: usage.limitBytes, parts: usage.parts },
        'sandbox over its disk limit: halted, failing its job',
      );
      await store.recordDisk(ref.jobId, {
        usedBytes: usage.usedBytes,
        limitBytes: usage.limitBytes,
        measuredAt: Date.now(),
      });
      await store.transition(ref.jobId, ['starting', 'running'], 'failed', { reason });
      await enqueueDestroy(destroyQueue, { jobId: ref.jobId, reason, outcome: 'failed' });
    },
    onError: (err, ref) => logger.error({ err, jobId: ref?.jobId }, 'disk budget check failed'),
  });
}
