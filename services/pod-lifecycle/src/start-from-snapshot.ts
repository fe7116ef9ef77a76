import type { Readable } from 'node:stream';
import { isLiveSandboxSpec, parseSnapshotFailure, parseStoredSpec } from '@sandstream/bus';
import type { SandboxBackend, SandboxRef } from '@sandstream/sandbox';
import { openSnapshot, type SnapshotSource } from './open-snapshot.js';
import type { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';

/** What a start needs to put a snapshot's files into a new sandbox (absent: no snapshots here). */
export interface SnapshotStarts {
  source: SnapshotSource;
  backend: SandboxBackend;
  /** The snapshots' freeze lease: one capture or restore per sandbox, a dead holder's thawed. */
  freeze: SnapshotFreezeGuard;
}

/**
 * How long a start waits for its snapshot to finish uploading: a fork's sandboxes are created
 * while the snapshot is captured, so the capture overlaps their create and agent boot.
 */
const START_UPLOAD_WAIT_MS = 10 * 60_000;

/** Milliseconds of a start's snapshot phases (StartSnapshot.restoreInto). */
export interface StartSnapshotTimings {
  openMs: number;
  waitedMs: number;
  restoreMs: number;
}

/** A start from a snapshot that can never succeed: the job fails with `reason`, without retries. */
export class SnapshotStartRefused extends Error {
  override readonly name = 'SnapshotStartRefused';
}

/** The snapshot a stored live sandbox spec starts from, or undefined. */
export function startSnapshotOf(stored: unknown): string | undefined {
  try {
    const spec = parseStoredSpec(stored);
    return isLiveSandboxSpec(spec) ? spec.fromSnapshot : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A new sandbox (create `fromSnapshot`, a fork) gets its snapshot's files here, before it enters
 * `running`: its first command already sees them, and no client has to restore anything. The
 * snapshot is checked as an in-place restore checks it (openSnapshot), and fetched (read whole,
 * verified, spooled to a local file) from the moment the start begins, while the sandbox is
 * created and its agent boots: the restore then only writes files. One that is missing, another
 * tenant's, for another backend or corrupt throws SnapshotStartRefused naming it (no retry can
 * fix it); anything else (NATS or the engine failing) throws as is, and the start is retried on
 * a clean sandbox.
 */
export class StartSnapshot {
  private readonly opened: Promise<Readable>;
  private readonly began = performance.now();
  private openedAt: number | undefined;

  constructor(
    private readonly starts: SnapshotStarts | undefined,
    private readonly snapshotId: string,
    tenant: string,
  ) {
    this.opened = starts
      ? openSnapshot(starts.source, snapshotId, tenant, { uploadWaitMs: START_UPLOAD_WAIT_MS })
      : Promise.reject(
          new SnapshotStartRefused(
            `snapshot ${snapshotId}: this pod-lifecycle keeps no snapshots (no NATS_URL)`,
          ),
        );
    this.opened.then(
      () => {
        this.openedAt = performance.now();
      },
      // Awaited by restoreInto, or never (the start ended first): not an unhandled rejection.
      () => {},
    );
  }

  /**
   * Where the start's time went (logged by the start): the open (record, read of the stored bytes,
   * checksum), how long the ready sandbox then still waited for it, and the restore's writes.
   */
  async restoreInto(jobId: string, ref: SandboxRef): Promise<StartSnapshotTimings> {
    const { snapshotId } = this;
    const ready = performance.now();
    let bytes: Readable;
    try {
      bytes = await this.opened;
    } catch (err) {
      if (err instanceof SnapshotStartRefused) throw err;
      const { code, message } = parseSnapshotFailure((err as Error).message);
      if (code === 'failed') throw err;
      throw new SnapshotStartRefused(code === 'corrupt' ? `${message} (refused as corrupt)` : message);
    }
    const backend = this.starts?.backend;
    if (!backend?.restoreFiles)
      throw new SnapshotStartRefused(
        `snapshot ${snapshotId}: the ${backend?.kind} backend restores no snapshots`,
      );
    const restoreFiles = backend.restoreFiles.bind(backend);
    const opened = performance.now();
    // Held under the job's id, as a resume's restore is: the freeze sweep thaws it if this replica dies.
    await this.starts?.freeze.hold(jobId, ref, () => restoreFiles(ref, bytes));
    return {
      openMs: Math.round((this.openedAt ?? opened) - this.began),
      waitedMs: Math.round(opened - ready),
      restoreMs: Math.round(performance.now() - opened),
    };
  }

  /** The local spool goes with its stream: closed here when the start ended without using it. */
  discard(): void {
    this.opened.then((stream) => stream.destroy()).catch(() => {});
  }
}
