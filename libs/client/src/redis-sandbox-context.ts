import type { JobStore, LiveSandboxSpec } from '@sandstream/bus';
import type { CommandRunnerContext } from './command-runner.js';

/** What RedisSandboxTransport and the terminal channels it opens share: the client's Redis side. */
export interface RedisSandboxContext extends CommandRunnerContext {
  store: JobStore;
  /** Queues a validated live-sandbox spec like a job (same admission and start). */
  submit(spec: LiveSandboxSpec): Promise<{ jobId: string; created: boolean }>;
  /** Asks the services to close the sandbox (a cancel request with reason `user`). */
  requestClose(sandboxId: string): Promise<void>;
  /** Set by forTenant: only this tenant's sandboxes (preview URLs check it; commands check it in Lua). */
  tenant?: string;
  /** Where preview URLs point (the API, the one proxy): client options previewUrl / previewDomain. */
  preview: { apiBase: string | undefined; domain: string };
}
