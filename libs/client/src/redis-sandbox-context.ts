import type {
  JobStore,
  LiveSandboxSpec,
  NetworkUpdateRequests,
  PauseRequestResult,
  ResumeResult,
  SetTimeoutResult,
  SnapshotRecords,
  SnapshotRequests,
} from '@sandstream/bus';
import type { CommandRunnerContext } from './command-runner.js';
import type { ReadyWatchContext } from './sandbox-ready-watch.js';

/** What RedisSandboxTransport and the terminal channels it opens share: the client's Redis side. */
export interface RedisSandboxContext extends CommandRunnerContext {
  store: JobStore;
  /** Queues a validated live-sandbox spec like a job (same admission and start). */
  submit(spec: LiveSandboxSpec): Promise<{ jobId: string; created: boolean }>;
  /** Asks the services to close the sandbox (a cancel request with reason `user`). */
  requestClose(sandboxId: string): Promise<void>;
  /** Asks the services to pause it (libs/bus requestPause). */
  requestPause(sandboxId: string): Promise<PauseRequestResult>;
  /** Moves its end (libs/bus setSandboxTimeout). */
  requestTimeout(sandboxId: string, seconds: number, tenant: string): Promise<SetTimeoutResult>;
  /** Puts a paused sandbox back in the queue under its id (libs/bus resumeSandbox). */
  requestResume(sandboxId: string): Promise<ResumeResult>;
  /** Snapshot records (read, list, delete) and capture/restore requests to pod-lifecycle. */
  snapshotRecords: SnapshotRecords;
  snapshotRequests: SnapshotRequests;
  /** Egress policy changes, asked of pod-lifecycle (network-requests.ts). */
  networkRequests: NetworkUpdateRequests;
  /**
   * Set by forTenant: snapshots and sandboxes of other tenants are answered as not found
   * (preview URLs check it; commands check it in Lua).
   */
  tenant?: string | undefined;
  /** Where preview URLs point (the API, the one proxy): client options previewUrl / previewDomain. */
  preview: { apiBase: string | undefined; domain: string };
  /** How create, connect and resume wait for readiness: woken by the sandbox's events stream. */
  readiness: ReadyWatchContext;
}
