/**
 * What a pause keeps of a sandbox: its files, as a snapshot captures them (on Docker every change
 * the container made, elsewhere its workspace), stored off the node so any node resumes it. The
 * capture and the store are the snapshots' (libs/sandbox and the snapshot store); a pause only
 * asks for them through this, so there is one capture and one store.
 */
export interface SandboxFilesKeeper {
  /**
   * Captures the files of a sandbox that still exists (its processes frozen for the capture) and
   * answers the reference `restore` and `discard` take.
   */
  keep(
    ref: { jobId: string; backend: string; id: string },
    owner: { sandboxId: string; tenant: string },
  ): Promise<string>;
  // Putting them back is the resuming start's (pod-lifecycle's PausedFiles.fetch and restore): it
  // reads them while the new sandbox is made, so it is not part of what a teardown needs here.
  /** Deletes kept files (closed while paused, or past its paused retention). Idempotent. */
  discard(kept: string): Promise<void>;
}
