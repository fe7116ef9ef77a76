import type {
  JobStore,
  LiveSandboxSpec,
  PauseRequestResult,
  ResumeResult,
  SnapshotRecords,
  SnapshotRequests,
} from '@sandstream/bus';
import type { CommandRunnerContext } from './command-runner.js';

/** What RedisSandboxTransport and the terminal channels it opens share: the client's Redis side. */
export interface RedisSandboxContext extends CommandRunnerContext {
  store: JobStore;
  /** Queues a validated live-sandbox spec like a job (same admission and start). */
  submit(spec: LiveSandboxSpec): Promise<{ jobId: string; created: boolean }>;
  /** Asks the services to close the sandbox (a cancel request with reason `user`). */
  requestClose(sandboxId: string): Promise<void>;
  /** Asks the services to pause it (libs/bus requestPause). */
  requestPause(sandboxId: string): Promise<PauseRequestResult>;
  /** Puts a paused sandbox back in the queue under its id (libs/bus resumeSandbox). */
  requestResume(sandboxId: string): Promise<ResumeResult>;
  /** Snapshot records (read, list, delete) and capture/restore requests to pod-lifecycle. */
  snapshotRecords: SnapshotRecords;
  snapshotRequests: SnapshotRequests;
  /**
   * Set by forTenant: snapshots and sandboxes of other tenants are answered as not found
   * (preview URLs check it; commands check it in Lua).
   */
  tenant?: string | undefined;
  /** Where preview URLs point (the API, the one proxy): client options previewUrl / previewDomain. */
  preview: { apiBase: string | undefined; domain: string };
}
