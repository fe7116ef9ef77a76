import { setTimeout as sleep } from 'node:timers/promises';
import type { JobState, JobStore, SnapshotRecords, SnapshotStore } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { CaptureCache } from './capture-cache.js';

export interface ForkSnapshotDropsDeps {
  store: Pick<JobStore, 'get'>;
  records: Pick<SnapshotRecords, 'delete'>;
  objects: Pick<SnapshotStore, 'delete'>;
  /** This replica's spool and plain copy of the capture go with it. */
  cache?: Pick<CaptureCache, 'forget'> | undefined;
  logger: Logger;
  /**
   * How long the forks are waited for at most: the upload grace, after which the committed
   * record expires anyway (SnapshotRecords.commit, temporary) and the reaper would take it.
   */
  waitMs: number;
  /** A fork with no record this long after the commit never will have one (its caller died first). */
  absentMs?: number;
  /** Pauses between looks at the forks' states: the first short, growing to `maxPauseMs`. */
  maxPauseMs?: number;
}

/** Until a fork is running its start may still read the snapshot; from then on (or ended) it holds its files. */
const BEFORE_FILES: readonly JobState[] = ['queued', 'scheduled', 'starting'];
const ABSENT_MS = 60_000;
const MAX_PAUSE_MS = 1_000;

/**
 * A fork's snapshot is temporary (SnapshotRequest `forks`): the SDK's fork() returns once its
 * forks run, and this replica, which took the capture, drops the snapshot (record, stored bytes,
 * local spool and copy) once each fork has its files: it is running (a start restores before
 * `running`), paused, ended, or never came to be. Done here and not by the caller, so a caller that exits
 * or crashes leaks nothing; should this replica die meanwhile, the record's expiry (one upload
 * grace after the commit) lets the reaper take record and bytes.
 */
export class ForkSnapshotDrops {
  private readonly waiting = new Set<Promise<void>>();
  private readonly stopping = new AbortController();

  constructor(private readonly deps: ForkSnapshotDropsDeps) {}

  /** Drops the committed snapshot once its forks hold their files (in the background). */
  schedule(tenant: string, snapshotId: string, forkIds: readonly string[]): void {
    const dropped = this.dropAfterForks(tenant, snapshotId, forkIds).catch((err) =>
      this.deps.logger.warn(
        { snapshotId, err: (err as Error).message },
        "a fork's snapshot was not dropped: the reaper takes it when its record expires",
      ),
    );
    this.waiting.add(dropped);
    void dropped.finally(() => this.waiting.delete(dropped));
  }

  /** Drops the snapshot now (its capture failed, or its forks are done). */
  async drop(tenant: string, snapshotId: string): Promise<void> {
    // Bytes first: a crash between the two leaves a record the reaper finds, never unnamed bytes.
    await this.deps.objects.delete(snapshotId);
    await this.deps.records.delete(snapshotId, tenant);
    await this.deps.cache?.forget(snapshotId);
  }

  /** Stops waiting (shutdown): what is still waited for is the reaper's once its record expires. */
  async close(): Promise<void> {
    this.stopping.abort();
    await Promise.all([...this.waiting]);
  }

  private async dropAfterForks(
    tenant: string,
    snapshotId: string,
    forkIds: readonly string[],
  ): Promise<void> {
    const committed = Date.now();
    const deadline = committed + this.deps.waitMs;
    const absentMs = this.deps.absentMs ?? ABSENT_MS;
    let pending = [...forkIds];
    let pauseMs = 10;
    for (;;) {
      const states = await Promise.all(pending.map(async (id) => (await this.deps.store.get(id))?.state));
      const absentTooLong = Date.now() - committed >= absentMs;
      pending = pending.filter((_, i) => {
        const state = states[i];
        return state === undefined ? !absentTooLong : BEFORE_FILES.includes(state);
      });
      if (pending.length === 0 || Date.now() >= deadline) break;
      if (this.stopping.signal.aborted) return;
      await sleep(pauseMs, undefined, { signal: this.stopping.signal }).catch(() => {});
      if (this.stopping.signal.aborted) return;
      pauseMs = Math.min(pauseMs * 2, this.deps.maxPauseMs ?? MAX_PAUSE_MS);
    }
    await this.drop(tenant, snapshotId);
    this.deps.logger.info(
      {
        snapshotId,
        forks: forkIds.length,
        // Forks still starting when the wait ran out: they find the snapshot gone.
        ...(pending.length > 0 ? { stillStarting: pending.length } : {}),
        afterCommitMs: Date.now() - committed,
      },
      "a fork's snapshot dropped",
    );
  }
}
