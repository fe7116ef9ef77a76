import type { JobStore, LiveSandboxSpec, SnapshotRecords, SnapshotRequests } from '@sandstream/bus';
import type { CommandRunnerContext } from './command-runner.js';

/** What RedisSandboxTransport and the terminal channels it opens share: the client's Redis side. */
export interface RedisSandboxContext extends CommandRunnerContext {
  store: JobStore;
  /** Queues a validated live-sandbox spec like a job (same admission and start). */
  submit(spec: LiveSandboxSpec): Promise<{ jobId: string; created: boolean }>;
  /** Asks the services to close the sandbox (a cancel request with reason `user`). */
  requestClose(sandboxId: string): Promise<void>;
  /** Snapshot records (read, list, delete) and capture/restore requests to pod-lifecycle. */
  snapshotRecords: SnapshotRecords;
  snapshotRequests: SnapshotRequests;
  /** Set by forTenant: snapshots and sandboxes of other tenants are answered as not found. */
  tenant?: string | undefined;
}
