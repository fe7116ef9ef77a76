import type { Readable } from 'node:stream';
import { isLiveSandboxSpec, parseSnapshotFailure, parseStoredSpec } from '@sandstream/bus';
import type { SandboxBackend, SandboxRef } from '@sandstream/sandbox';
import type { CopyLease } from './local-copies.js';
import { openLocalCopy, openSnapshot, type SnapshotSource } from './open-snapshot.js';
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
  /** Restored from a plain copy this replica made of a fork's capture (local-copies.ts). */
  fromCopy?: boolean;
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
/** What a start restores from: a plain copy made on this node, or the snapshot's bytes. */
type Opened = { copy: CopyLease } | { stream: Readable };

export class StartSnapshot {
  private readonly opened: Promise<Opened>;
  private readonly began = performance.now();
  private openedAt: number | undefined;

  constructor(
    private readonly starts: SnapshotStarts | undefined,
    private readonly snapshotId: string,
    private readonly tenant: string,
  ) {
    this.opened = starts
      ? this.open(starts)
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

  /** A fork's plain copy where this replica made one and the backend restores copies; else the bytes. */
  private async open(starts: SnapshotStarts): Promise<Opened> {
    if (starts.backend.restoreCopy) {
      const copy = await openLocalCopy(starts.source, this.snapshotId, this.tenant, START_UPLOAD_WAIT_MS);
      if (copy) {
        starts.source.onOpened?.(this.snapshotId, 'copy');
        return { copy };
      }
    }
    return { stream: await this.openBytes(starts) };
  }

  private openBytes(starts: SnapshotStarts): Promise<Readable> {
    return openSnapshot(starts.source, this.snapshotId, this.tenant, { uploadWaitMs: START_UPLOAD_WAIT_MS });
  }

  /**
   * Where the start's time went (logged by the start): the open (record, read of the stored bytes,
   * checksum), how long the ready sandbox then still waited for it, and the restore's writes.
   */
  async restoreInto(jobId: string, ref: SandboxRef): Promise<StartSnapshotTimings> {
    const { snapshotId } = this;
    const ready = performance.now();
    const backend = this.starts?.backend;
    let opened = await refusedAs(this.opened);
    if (!backend?.restoreFiles)
      throw new SnapshotStartRefused(
        `snapshot ${snapshotId}: the ${backend?.kind} backend restores no snapshots`,
      );
    const begun = performance.now();
    const timings = () => ({
      openMs: Math.round((this.openedAt ?? begun) - this.began),
      waitedMs: Math.round(begun - ready),
      restoreMs: Math.round(performance.now() - begun),
    });
    if ('copy' in opened) {
      if (await this.restoreCopy(jobId, ref, opened.copy)) return { ...timings(), fromCopy: true };
      // The copy was damaged or its restore failed: the snapshot's bytes make the files exact.
      opened = { stream: await refusedAs(this.openBytes(this.starts as SnapshotStarts)) };
    }
    const bytes = opened.stream;
    const restoreFiles = backend.restoreFiles.bind(backend);
    // Held under the job's id, as a resume's restore is: the freeze sweep thaws it if this replica dies.
    await this.starts?.freeze.hold(jobId, ref, () => restoreFiles(ref, bytes));
    return timings();
  }

  /** The copy into the sandbox, once it checks out; false (the copy dropped, the reason heard) otherwise. */
  private async restoreCopy(jobId: string, ref: SandboxRef, copy: CopyLease): Promise<boolean> {
    const starts = this.starts as SnapshotStarts;
    const restoreCopy = starts.backend.restoreCopy?.bind(starts.backend);
    try {
      if (!restoreCopy || (await copy.check()) !== undefined) return false;
      await starts.freeze.hold(jobId, ref, () => restoreCopy(ref, copy.dir));
      return true;
    } catch (err) {
      starts.source.onCacheRefused?.(
        `restoring ${this.snapshotId} from its local copy failed (${(err as Error).message}): restored from its bytes instead`,
      );
      return false;
    } finally {
      copy.release();
    }
  }

  /** The local spool or copy goes with the start: released here when the start ended without using it. */
  discard(): void {
    this.opened
      .then((opened) => ('copy' in opened ? opened.copy.release() : opened.stream.destroy()))
      .catch(() => {});
  }
}

/** The open's failure as the start reports it: refused (no retry can help) unless the store failed. */
async function refusedAs<T>(opening: Promise<T>): Promise<T> {
  try {
    return await opening;
  } catch (err) {
    if (err instanceof SnapshotStartRefused) throw err;
    const { code, message } = parseSnapshotFailure((err as Error).message);
    if (code === 'failed') throw err;
    throw new SnapshotStartRefused(code === 'corrupt' ? `${message} (refused as corrupt)` : message);
  }
}
