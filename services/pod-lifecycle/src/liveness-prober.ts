import { type JobStore, type SandboxLiveness, sandboxRefOf } from '@sandstream/bus';
import type { SandboxBackend } from '@sandstream/sandbox';
import { PeriodicWorker, type RoundOutcome } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';

export interface LivenessProberOptions {
  liveness: SandboxLiveness;
  store: JobStore;
  backend: SandboxBackend;
  logger: Logger;
  intervalMs?: number;
  /**
   * Longest pause while nobody is suspect (rounds back off from `intervalMs` up to it): the
   * dispatcher waits HEARTBEAT_VERDICT_WAIT_MS (10 s) for a verdict, so this stays well under it.
   */
  idleMaxMs?: number;
  onProgress?: () => void;
}

/**
 * pod-lifecycle's half of the late-heartbeat check (SandboxLiveness in libs/bus): for every
 * sandbox the step-dispatcher marked suspect, asks the backend whether its process, container or
 * pod still runs, and writes the verdict the dispatcher waits for. Asked again every round, so a
 * sandbox that dies while it is given more time is reported gone at once. While nobody is
 * suspect the rounds back off (one read of the suspects every few seconds, not every second).
 */
export class LivenessProber extends PeriodicWorker {
  constructor(private readonly options: LivenessProberOptions) {
    super('liveness prober', options.intervalMs ?? 1000, options);
  }

  /** One round: every suspect asked about once. */
  async tick(): Promise<RoundOutcome> {
    const { liveness, store, backend, logger } = this.options;
    const isRunning = backend.isRunning?.bind(backend);
    if (!isRunning) return 'idle';
    const suspects = await liveness.suspects();
    for (const jobId of suspects) {
      const sandbox = (await store.get(jobId))?.sandbox;
      // Another backend's sandbox (a replica of another kind answers it), or none recorded.
      if (!sandbox || sandbox.backend !== backend.kind) continue;
      let state: 'running' | 'gone' | 'unknown';
      try {
        const running = await isRunning(sandboxRefOf(jobId, sandbox));
        state = running === undefined ? 'unknown' : running ? 'running' : 'gone';
      } catch (err) {
        logger.warn(
          { jobId, err: (err as Error).message },
          'could not ask the backend whether a sandbox runs',
        );
        state = 'unknown';
      }
      await liveness.record(jobId, state);
    }
    return suspects.length > 0 ? 'busy' : 'idle';
  }
}
