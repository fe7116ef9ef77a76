import type { SandboxRecord } from '@sandstream/bus';

/** What `sandbox.pause()` answers. */
export interface PauseResult {
  /** The record once paused (state `paused`, `pausedAt`). */
  sandbox: SandboxRecord;
  /**
   * The commands that were still running (or waiting) when the pause was asked: the pause
   * stopped them (their results say cancelled). Background processes and terminals included.
   */
  stoppedCommands: string[];
}
