import type { CommandRecord } from '@sandstream/bus';
import type { StepResult } from '@sandstream/wire';

/** One entry of `history()`: what was asked, when, and how it ended (once it did). */
export interface CommandHistoryEntry extends CommandRecord {
  result: StepResult | undefined;
}

export interface SandboxStats {
  cpuSeconds: number | null;
  memoryBytes: number | null;
  memoryLimitBytes: number | null;
  workspaceBytes: number;
  workspaceFiles: number;
  workspaceTruncated: boolean;
  /**
   * Disk the sandbox fills (work tree, own writable layer, tmpfs) and its limit, as the disk
   * budget last measured them; null where the backend's engine enforces the limit itself
   * (Kubernetes: the kubelet) or before the first measure.
   */
  diskBytes: number | null;
  diskLimitBytes: number | null;
  /** Commands handed to the sandbox since it opened (the stats call itself included). */
  commandsRun: number;
  commandsRunning: number;
  /** Output lines of the commands still in its history. */
  outputLines: number;
}
