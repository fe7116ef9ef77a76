import type { Queue } from 'bullmq';
import type { SandstreamWarning } from './client-options.js';

/** How long one sighting of a scheduler counts as "alive recently" (no CLIENT LIST meanwhile). */
const SEEN_TTL_MS = 30_000;

/**
 * Tells whether any scheduler consumes a namespace's jobs queue, so a submit to a namespace
 * nobody serves warns instead of leaving its caller waiting at `queued` forever.
 *
 * It asks BullMQ (Queue.getWorkersCount: the connections a Worker names after its queue in
 * CLIENT LIST) rather than adding a heartbeat: every scheduler already holds such a connection
 * while it runs. A sighting is remembered for SEEN_TTL_MS and concurrent checks share one
 * CLIENT LIST, so a burst of submits costs one round trip, not one each.
 */
export class SchedulerPresence {
  private seenAt = Number.NEGATIVE_INFINITY;
  private inFlight: Promise<boolean | null> | undefined;

  constructor(
    private readonly queue: Pick<Queue, 'getWorkersCount'>,
    private readonly namespace: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** A `no-scheduler` warning, or null when one is connected or it cannot be told. */
  async check(): Promise<SandstreamWarning | null> {
    if (this.now() - this.seenAt < SEEN_TTL_MS) return null;
    this.inFlight ??= this.count().finally(() => {
      this.inFlight = undefined;
    });
    const connected = await this.inFlight;
    if (connected !== false) return null;
    return {
      code: 'no-scheduler',
      namespace: this.namespace,
      message:
        `no scheduler is connected to namespace "${this.namespace}": the job stays queued until one ` +
        'starts (are the services running, with the same namespace?)',
    };
  }

  private async count(): Promise<boolean | null> {
    try {
      const connected = (await this.queue.getWorkersCount()) > 0;
      if (connected) this.seenAt = this.now();
      return connected;
    } catch {
      // CLIENT LIST may be refused (an ACL user without it, a managed Redis): a warning we cannot
      // compute must not fail a submit that succeeded.
      return null;
    }
  }
}
