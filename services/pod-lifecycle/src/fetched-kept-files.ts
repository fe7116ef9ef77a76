import type { Readable } from 'node:stream';

/**
 * A resume's kept files, asked for the moment its start begins (PausedFiles.fetch): this
 * replica's spool of the pause, checked whole; or the store's bytes, streamed and checked as read
 * where the restore runs while the agent boots, else read whole and checked while the sandbox is
 * made. Without it a resume paid the whole read after its agent was up.
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

  /** The bytes go with the start: dropped here (a spool's file closed) when it ended without them. */
  discard(): void {
    this.bytes.then((bytes) => bytes.destroy()).catch(() => {});
  }
}
