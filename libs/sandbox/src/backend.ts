import type { Egress, KeyStyle, SpecNetwork } from '@sandstream/wire';
import type { SandboxSpec } from './sandbox-spec.js';

export type BackendKind = 'inprocess' | 'docker' | 'kubernetes';

/** How the agent inside the sandbox reaches Redis, and what it is told about its job. */
export interface AgentConnection {
  /** As seen from inside the sandbox (a container may need a different host than the service). */
  redisUrl: string;
  keyStyle: KeyStyle;
  /** Shared completion stream the agent notifies after each result (see wire CompletionNotice). */
  notifyStream?: string;
  heartbeatIntervalMs?: number;
  /**
   * A live sandbox's agent: it never leaves on its own idleness (its client may think for a long
   * time); the services close it on idle expiry or lifetime.
   */
  live?: boolean;
  /** Extra environment for the agent process only (e.g. OTEL_* for its spans). */
  agentEnv?: Record<string, string>;
  /**
   * A warm pool member: the agent boots, then waits on its `claim` key for the job it will serve
   * (the job id it is started with is the member's id).
   */
  awaitClaim?: boolean;
}

/**
 * How far a create has come in a phase long enough to show: pulling an image that is not on the
 * node. Reported as it goes, then once with `done`, so a caller can put it on the create's events.
 */
export interface CreateProgress {
  phase: 'image-pull';
  image: string;
  /** Layers the engine named so far, and those it needs nothing more for. */
  layers: number;
  layersDone: number;
  /** Bytes downloaded, of the layers whose size the engine told (0 where none told yet). */
  downloadedBytes: number;
  totalBytes: number;
  done: boolean;
}

export interface CreateSandboxRequest {
  jobId: string;
  tenant: string;
  spec: SandboxSpec;
  agent: AgentConnection;
  /** Called as a long create phase advances (an image pull); never with secrets. */
  onProgress?: (progress: CreateProgress) => void;
}

/** Enough to find the sandbox again, from any process (state lives in Redis, not in memory). */
export interface SandboxRef {
  jobId: string;
  backend: BackendKind;
  /** Container id, pod name or pid. */
  id: string;
}

export interface SandboxInfo extends SandboxRef {
  tenant: string | undefined;
  labels: Record<string, string>;
  createdAt: Date | undefined;
  state: 'starting' | 'running' | 'exited' | 'unknown';
}

export interface ListOptions {
  /**
   * false: the caller does not read `state`, so a backend that has to probe each sandbox for it
   * may answer `unknown` instead. The in-process backend reads /proc/<pid>/stat per agent for it:
   * per sandbox per pass, the largest part of what the reaper's list cost (docs/benchmarks.md,
   * "The reaper per job, part 6"). Backends that get the state with the listing ignore it.
   */
  state?: boolean;
}

/** Why a sandbox did not become ready; `capacity` errors are worth retrying later. */
export type SandboxStartFailure =
  | 'image_not_found'
  | 'image_pull'
  | 'agent_crashed'
  | 'unschedulable'
  | 'quota'
  | 'deadline'
  /** The spec asks for more CPU, memory or processes than the operator's maximum. */
  | 'resource_limit'
  | 'backend_error';

export class SandboxStartError extends Error {
  override readonly name = 'SandboxStartError';
  constructor(
    readonly reason: SandboxStartFailure,
    message: string,
    /** True where waiting and retrying can help (quota, unschedulable). */
    readonly capacity = reason === 'quota' || reason === 'unschedulable',
  ) {
    super(message);
  }
}

export interface WaitReadyOptions {
  /** Checks the agent's heartbeat key; the backend supplies the "it runs" half of readiness. */
  isAgentAlive: () => Promise<boolean>;
  /**
   * Resolves true as soon as the agent has announced itself (or is otherwise known alive), false
   * when `timeoutMs` passes first: a blocking wait, so a backend checks its process or container
   * only between two of these. Absent, the backend polls isAgentAlive.
   */
  agentAnnounced?: (timeoutMs: number) => Promise<boolean>;
  signal?: AbortSignal;
}

export interface DestroyOptions {
  /** Time for the agent to exit on its own after the shutdown step before it is killed. */
  graceMs?: number;
}

/** What a sandbox holds on disk now, against its limit (spec resources.limits.ephemeralStorage). */
export interface SandboxDiskUsage {
  usedBytes: number;
  limitBytes: number;
  /**
   * `watch`: measured by the backend's owner and stopped past the limit (DiskBudgetWatch), with
   * `quota` also set where the engine itself refuses writes past it on the container's layer;
   * `kubelet`: the kubelet evicts the pod (ephemeral-storage), nothing to watch here.
   */
  enforcement: 'watch' | 'kubelet';
  quota: boolean;
  /** Bytes per part (work tree, container layer, …), for logs and stats. */
  parts: Record<string, number>;
  /**
   * The read-write volumes with a size limit it mounts, each measured against its own limit
   * (docs/volumes.md): the writer past it is stopped like a sandbox past its disk limit.
   */
  volumes?: VolumeUsage[];
}

export interface VolumeUsage {
  volume: string;
  usedBytes: number;
  limitBytes: number;
}

/**
 * One interface for every place a sandbox can live. Implementations hold no state that another
 * process could not rebuild from a SandboxRef and the labels, so any replica can destroy or
 * list what another replica made.
 */
export interface SandboxBackend {
  readonly kind: BackendKind;
  create(request: CreateSandboxRequest): Promise<SandboxRef>;
  /**
   * Resolves when the sandbox runs and its agent heart-beats; rejects with SandboxStartError.
   * `deadlineMs` is a time budget in milliseconds counted from the call (not a timestamp).
   */
  waitReady(ref: SandboxRef, deadlineMs: number, options: WaitReadyOptions): Promise<void>;
  /**
   * Asks the agent to leave, waits its grace, then removes what the backend made (process,
   * container, pod, their files). Idempotent: destroying a sandbox that is already gone succeeds.
   * Not the sandbox's Redis keys: those are its footprint's one owner's (libs/bus
   * sandbox-footprint.ts), freed by tearDownSandbox after this returns.
   */
  destroy(ref: SandboxRef, options?: DestroyOptions): Promise<void>;
  /**
   * Whether the sandbox's process, container or pod still runs — not whether its agent answers:
   * an agent starved of CPU misses heartbeats while its sandbox runs on. Asked (by pod-lifecycle,
   * for the step-dispatcher) before a sandbox with a late heartbeat is failed as lost. `undefined`:
   * this backend cannot tell (another host's in-process sandbox); the caller decides as before.
   */
  isRunning?(ref: SandboxRef): Promise<boolean | undefined>;
  /**
   * Where the services reach a port the sandbox listens on (preview URLs, services/api's
   * proxy): Docker the container's address on its network, in-process the loopback, Kubernetes
   * the pod IP. `undefined`: not reachable from here (gone, no address yet). pod-lifecycle
   * records the host with the sandbox (JobSandbox.host) once it is ready.
   */
  portAddress?(ref: SandboxRef, port: number): Promise<{ host: string; port: number } | undefined>;
  /**
   * Replaces a running sandbox's egress policy (spec.network), taking effect for its next
   * connection. Docker only so far (its iptables chain, docs/sandbox-backends.md "Egress rules").
   */
  updateNetwork?(ref: SandboxRef, network: SpecNetwork): Promise<void>;
  /**
   * Why this backend cannot enforce `egress` at all (Kubernetes: domain entries), naming the field
   * under `prefix`; undefined when it can. Asked before updateNetwork, so such a request is
   * answered as unsupported rather than as a failure.
   */
  egressRefusal?(egress: Egress, prefix: string): string | undefined;
  /** Sandboxes this backend manages (by label), for the reaper. */
  list(options?: ListOptions): Promise<SandboxInfo[]>;
  /**
   * Its disk use now, or undefined when it is gone or not measurable from here (an in-process
   * sandbox of another host). Backends whose disk limit the platform enforces may omit it.
   */
  diskUsage?(ref: SandboxRef): Promise<SandboxDiskUsage | undefined>;
  /**
   * Stops every process of the sandbox at once (no grace, no shutdown step), leaving its state
   * for destroy: what a budget stop does before the destroy request is even queued.
   */
  halt?(ref: SandboxRef): Promise<void>;
  /**
   * Removes a deleted volume's backend object (`spec.volumes[].source`); a missing one is no
   * error. The reaper calls it for the volumes the store queued (docs/volumes.md).
   */
  removeVolume?(source: string): Promise<void>;
  /**
   * The sandbox's files as a snapshot stream (snapshot/snapshot-codec.ts), its processes frozen
   * while the stream is read: `done` resolves after the thaw with how long they were frozen.
   * Read the stream to its end (or destroy it): the sandbox stays frozen until then.
   */
  captureFiles?(ref: SandboxRef): Promise<FilesCapture>;
  /**
   * Makes the sandbox's files exactly a snapshot's (what it adds goes, what it removed comes
   * back). The caller stops running commands first; the processes left are frozen meanwhile.
   */
  restoreFiles?(ref: SandboxRef, snapshot: AsyncIterable<Buffer>): Promise<FilesRestored>;
  /**
   * The sandbox's files copied as plain trees into `into/<part>` on this node (`into` is made
   * here), its processes frozen during the copy only: a fork placed on this node restores from
   * the copy (restoreCopy) without a stream in between (snapshot/tree-copy.ts).
   */
  copyFiles?(ref: SandboxRef, into: string): Promise<FilesCopied>;
  /**
   * Whether restoreFiles and restoreCopy work, and pay, from the moment create() answered, while
   * the agent still boots: a start from a snapshot or a resume then writes the files during the
   * boot instead of after it. True where the files are reachable at once and the restore's freeze
   * leaves the agent running (in-process: its directory, the processes below the agent stopped).
   * Absent where the restore needs the running sandbox (Kubernetes: an exec into a pod that may
   * not run yet) or freezes the agent too (Docker's `docker pause`: the boot would wait anyway).
   */
  readonly restoresWhileBooting?: boolean;
  /**
   * Makes the sandbox's files exactly the trees a copyFiles of this backend made under `from`,
   * the processes left frozen meanwhile (the caller stopped running commands).
   */
  restoreCopy?(ref: SandboxRef, from: string): Promise<Pick<FilesRestored, 'removed' | 'frozenMs'>>;
  /**
   * Lets a sandbox run again that a capture or restore froze and never thawed (its process was
   * killed mid-way). Idempotent; a sandbox that is not frozen is left as it is.
   */
  thaw?(ref: SandboxRef): Promise<void>;
  /**
   * Starts what the backend serves its sandboxes for as long as the service runs (the Kubernetes
   * backend's egress proxy, when configured); pod-lifecycle calls it once before it takes work.
   * A failure is the service's start failure.
   */
  serve?(): Promise<void>;
  close(): Promise<void>;
}

/** A capture under way (SandboxBackend.captureFiles). */
export interface FilesCapture {
  stream: import('node:stream').Readable;
  done: Promise<{ frozenMs: number; entries: number }>;
  /** What the capture holds, for docs and replies: `work` (the work tree), `root` (a container's own layer). */
  parts: string[];
}

/** A copy made (SandboxBackend.copyFiles): the parts copied, each a tree `<into>/<part>`. */
export interface FilesCopied {
  parts: string[];
  frozenMs: number;
}

/** What a restore did (SandboxBackend.restoreFiles). */
export interface FilesRestored {
  entries: number;
  bytes: number;
  /** Paths removed because the snapshot did not hold them (top-level ones counted once). */
  removed: number;
  frozenMs: number;
}

/** Labels every backend puts on what it creates. */
export const SandboxLabels = {
  managedBy: 'app.kubernetes.io/managed-by',
  managedByValue: 'sandstream',
  jobId: 'sandstream.dev/job-id',
  tenant: 'sandstream.dev/tenant',
  /** Which per-job key style the agent was started with, so any process can reach its keys. */
  keyStyle: 'sandstream.dev/key-style',
  /** Name of the template the spec was resolved from. */
  template: 'sandstream.dev/template',
  /**
   * The installation that created the sandbox (SANDSTREAM_INSTALLATION): a reaper destroys only
   * orphans carrying its own, so installations sharing an engine never touch each other's.
   */
  installation: 'sandstream.dev/installation',
  /**
   * The installation id kept in the Redis the sandbox's job lives in (InstallationIdentity in
   * libs/bus): unique per Redis and namespace even where names collide. A reaper destroys a
   * sandbox whose job record it cannot find only when this is one of its Redis's ids.
   */
  installationId: 'sandstream.dev/installation-id',
  /** The warm pool a member was made for (its job-id label is then the member's id). */
  warmPool: 'sandstream.dev/warm-pool',
} as const;
