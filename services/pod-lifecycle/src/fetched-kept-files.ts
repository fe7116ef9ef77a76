import type { Readable } from 'node:stream';

/**
 * A resume's kept files, fetched (read whole from the store, checked against their recorded size
 * and SHA-256, spooled to a local file) from the moment its start begins: the read overlaps the
 * sandbox's create and its agent's boot, so the restore only writes files, as a first start from
 * a snapshot does (StartSnapshot). Without it a resume paid the whole read after its agent was up.
 */
export class FetchedKeptFiles {
  constructor(
    /** The record's reference to the kept files: what the restore then lets go of. */
    readonly kept: string,
    readonly bytes: Promise<Readable>,
  ) {
    // Awaited by the restore, or never (the start ended first): not an unhandled rejection.
    bytes.then(
      () => {
        this.fetchedAt = performance.now();
      },
      () => {},
    );
  }

  private readonly began = performance.now();
  private fetchedAt: number | undefined;

  /** Until the bytes could be read (logged by the start): the whole read and check, or ~0 for a stream. */
  fetchMs(): number | undefined {
    return this.fetchedAt === undefined ? undefined : Math.round(this.fetchedAt - this.began);
  }

  /** The local spool goes with the start: dropped here when the start ended without using it. */
  discard(): void {
    this.bytes.then((bytes) => bytes.destroy()).catch(() => {});
  }
}
