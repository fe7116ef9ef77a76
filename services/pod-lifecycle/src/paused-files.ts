import type { Readable } from 'node:stream';
import { type PausedFilesStore, pausedObjectName, type SandboxFilesKeeper } from '@sandstream/bus';
import { checkedWhole, type SandboxBackend, type SandboxSpec } from '@sandstream/sandbox';
import type { CaptureCache } from './capture-cache.js';
import { FetchedKeptFiles } from './fetched-kept-files.js';
import type { SnapshotFreezeGuard } from './snapshot-freeze-guard.js';

/**
 * A pause's files: the backend's capture (its processes frozen while it is read) streamed into
 * the snapshot store, and back through the backend's restore. No second capture and no second
 * store: this only joins the two. With this replica's capture cache, the capture is spooled there
 * first and uploaded from the spool, which the cache keeps (bounded, as snapshots' captures): a
 * resume on the node that paused restores from the local file, checked whole against the kept
 * files' size and SHA-256, instead of reading the store; any other node reads the store.
 */
export class PausedFiles implements SandboxFilesKeeper {
  constructor(
    private readonly backend: SandboxBackend,
    /** The snapshots' freeze lease: one capture or restore per sandbox, a dead holder's thawed. */
    private readonly freeze: SnapshotFreezeGuard,
    private readonly store: PausedFilesStore,
    private readonly cache?: CaptureCache | undefined,
    private readonly onCacheRefused?: (reason: string) => void,
  ) {}

  async keep(
    ref: { jobId: string; backend: string; id: string },
    owner: { sandboxId: string; tenant: string },
  ): Promise<string> {
    if (!this.backend.captureFiles)
      throw new Error(
        `the ${this.backend.kind} backend cannot capture a sandbox's files, so it cannot pause one`,
      );
    const captureFiles = this.backend.captureFiles.bind(this.backend);
    const sandboxRef = this.refOf(ref);
    return this.freeze.hold(owner.sandboxId, sandboxRef, async () => {
      const capture = await captureFiles(sandboxRef);
      try {
        if (!this.cache) {
          const kept = await this.store.put(capture.stream, owner);
          await capture.done;
          return kept;
        }
        const objectId = pausedObjectName(owner.sandboxId);
        const spooled = await this.cache.spool(objectId, capture.stream);
        await capture.done;
        try {
          const kept = await this.store.put(spooled.read(), owner, objectId);
          // Kept only once stored whole: a resume finds it by the object the record names.
          await spooled.keep();
          return kept;
        } catch (err) {
          await spooled.discard();
          throw err;
        }
      } catch (err) {
        // A failed upload must not leave the sandbox frozen: the capture thaws when its stream ends.
        capture.stream.destroy();
        await capture.done.catch(() => undefined);
        throw err;
      }
    });
  }

  /**
   * The kept files for a resume's restore. Where the backend restores while the agent boots, a
   * stream checked as it is read, so the restore's writes overlap the read (nothing is read before
   * the restore begins, at the sandbox's create); elsewhere the restore waits for the agent, so
   * the bytes are read whole and checked from now on, while the sandbox is made.
   */
  fetch(kept: string): FetchedKeptFiles {
    return new FetchedKeptFiles(kept, this.open(kept));
  }

  /** This replica's spool of the pause when it holds it whole, else the store (fetch). */
  private async open(kept: string): Promise<Readable> {
    if (this.cache) {
      const { objectId, ...expected } = this.store.located(kept);
      const local = await this.cache.open(objectId, expected, this.onCacheRefused);
      if (local) return local;
    }
    return this.backend.restoresWhileBooting ? this.store.stream(kept) : this.store.get(kept);
  }

  async restore(
    ref: { jobId: string; backend: string; id: string },
    fetched: FetchedKeptFiles,
  ): Promise<void> {
    if (!this.backend.restoreFiles)
      throw new Error(
        `the ${this.backend.kind} backend cannot restore a sandbox's files, so it cannot resume one`,
      );
    const restoreFiles = this.backend.restoreFiles.bind(this.backend);
    const sandboxRef = this.refOf(ref);
    // Checked against their recorded size and SHA-256: found whole before (the store's get), or
    // as they are read, the stream failing at its end, which the decoder reads to before it returns.
    const bytes = checkedWhole(await fetched.bytes);
    // Held under the new life's id (the job's): the freeze sweep thaws it if this replica dies.
    await this.freeze.hold(ref.jobId, sandboxRef, () => restoreFiles(sandboxRef, bytes));
  }

  /**
   * Why a sandbox of this spec cannot pause here, or undefined when it can: said when it starts
   * (the record's `unpausable`), so a pause is refused up front instead of failing the sandbox.
   */
  cannotPause(_spec: SandboxSpec): string | undefined {
    // Any spec on a backend that captures can pause: a gVisor (runsc) Docker sandbox's container
    // layer and work volume through the host when its runtime shares its root file system, its
    // work volume through the container otherwise (docs/snapshots.md). The spec stays for a
    // refusal that depends on it.
    if (!this.backend.captureFiles || !this.backend.restoreFiles)
      return `the ${this.backend.kind} backend cannot capture and restore a sandbox's files`;
    return undefined;
  }

  async discard(kept: string): Promise<void> {
    if (this.cache) {
      // A kept reference that does not parse is the store's to refuse (below), not the spool's.
      const located = locatedIfReadable(this.store, kept);
      if (located) await this.cache.forget(located.objectId);
    }
    await this.store.delete(kept);
  }

  private refOf(ref: { jobId: string; backend: string; id: string }) {
    return { ...ref, backend: ref.backend as SandboxBackend['kind'] };
  }
}

/** Where kept files are (the store's `located`), or undefined for a reference the store cannot read. */
function locatedIfReadable(
  store: PausedFilesStore,
  kept: string,
): ReturnType<PausedFilesStore['located']> | undefined {
  try {
    return store.located(kept);
  } catch {
    return undefined;
  }
}
