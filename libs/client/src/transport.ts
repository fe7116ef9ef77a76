import type { Readable } from 'node:stream';
import type {
  CancelResult,
  CommandStep,
  JobRecord,
  JobSpec,
  LiveSandboxSpec,
  LiveSandboxSpecInput,
  SandboxRecord,
  SubmitResult,
} from '@sandstream/bus';
import type { ControlMessage, FileEntry, GrepMatch, NetworkPolicy } from '@sandstream/wire';
import type { FollowOptions, ListOptions } from './client-options.js';
import type { Execution } from './code-execution.js';
import type { ExecResult } from './command-output.js';
import type { RunCommandOptions } from './command-runner.js';
import type { FollowItem } from './follow-entry.js';
import type { CommandHistoryEntry, SandboxStats } from './sandbox-history.js';
import type {
  CreateSandboxOptions,
  GrepOptions,
  ListSandboxesOptions,
  TerminalOptions,
} from './sandbox-options.js';
import type { PauseResult } from './sandbox-pause-result.js';
import type { PortUrlRequest } from './sandbox-ports.js';
import type { RestoreResult, SnapshotInfo } from './snapshots.js';

/**
 * How the SDK reaches a deployment. The public classes (SandstreamClient, Sandboxes, Sandbox,
 * SandboxFiles, SandboxProcesses, Terminal) validate their input and shape their answers; every
 * call that leaves the process goes through one of these two implementations, chosen by the
 * client's options: Redis (redis-transport.ts, inside the cluster) or the HTTP API
 * (http/http-transport.ts, from anywhere else). Both throw the same typed errors.
 */
export interface SandstreamTransport {
  readonly jobs: JobTransport;
  readonly sandboxes: SandboxTransport;
  close(): Promise<void>;
}

/** A sandbox's end as setTimeout left it. */
export interface SandboxEndsAt {
  /** When it ends (epoch ms). */
  endsAt: number;
  /** The operator's maximum lifetime cut what was asked. */
  capped: boolean;
}

/** Jobs. */
export interface JobTransport {
  /**
   * Submits a spec the caller validated. `tenantGiven`: whether the caller named its tenant (over
   * HTTP an unnamed one is the API key's, not the parsed spec's `default`).
   */
  submit(spec: JobSpec, tenantGiven: boolean): Promise<SubmitResult>;
  get(jobId: string): Promise<JobRecord | null>;
  list(options: ListOptions): Promise<JobRecord[]>;
  cancel(jobId: string, reason: string): Promise<CancelResult>;
  follow(jobId: string, options: FollowOptions): AsyncGenerator<FollowItem, void, undefined>;
  /** follow() a read at a time (as many items as one read brought). */
  followPages(jobId: string, options: FollowOptions): AsyncGenerator<FollowItem[], void, undefined>;
}

/** A command's step as exec and shell send it. */
export type RunStep = Extract<CommandStep, { kind?: 'run' }> | Extract<CommandStep, { kind: 'shell' }>;

/** A code interpreter cell as runCode sends it. */
export type CodeCommand = Extract<CommandStep, { kind: 'code' }>;

/** A signal a command's tree is killed with. */
export type KillSignal = NonNullable<ControlMessage['signal']>;

/** What a create answers: the id, and the record when the transport has it without another read. */
export interface CreatedSandbox {
  id: string;
  record?: SandboxRecord | undefined;
}

/** Live sandboxes, by id; every method throws the typed errors of sandbox-errors.ts. */
export interface SandboxTransport {
  /**
   * The same, for one tenant's sandboxes only: a command to another's is refused as one to a
   * sandbox that does not exist (over Redis in the push script; over HTTP the key decides).
   */
  forTenant(tenant: string): SandboxTransport;
  /**
   * Queues the spec the caller validated (`spec`; `input` as given) and, unless `wait` is false,
   * waits until it is ready; answers its id, and its record when it read one on the way.
   */
  create(
    spec: LiveSandboxSpec,
    input: LiveSandboxSpecInput,
    options: CreateSandboxOptions,
  ): Promise<CreatedSandbox>;
  /** Waits while it is being created, then counts as activity. */
  connect(id: string, options: CreateSandboxOptions): Promise<void>;
  get(id: string): Promise<SandboxRecord | null>;
  list(options: ListSandboxesOptions): Promise<SandboxRecord[]>;
  /** Asks to close it and resolves with its record once it ended. */
  close(id: string): Promise<SandboxRecord>;
  /**
   * Asks it to pause and resolves once it is paused (its files kept, its slot and sandbox
   * freed), naming the commands the pause stopped.
   */
  pause(id: string): Promise<PauseResult>;
  /** Resumes a paused sandbox under its id; unless `wait` is false, resolves once it is ready. */
  resume(id: string, options: CreateSandboxOptions): Promise<SandboxRecord>;
  keepAlive(id: string): Promise<void>;
  /** It now ends `seconds` from now (capped at the operator's maximum lifetime). */
  setTimeout(id: string, seconds: number): Promise<SandboxEndsAt>;
  history(id: string): Promise<CommandHistoryEntry[]>;
  stats(id: string): Promise<SandboxStats>;

  /** Runs a command and follows it to its result (telling onStart its id: Sandbox turns an abort into cancel()). */
  run(id: string, step: RunStep, options: RunCommandOptions): Promise<ExecResult>;
  /** Runs a code interpreter cell and follows it to its answer (output lines to onLine). */
  runCode(id: string, step: CodeCommand, options: RunCommandOptions): Promise<Execution>;
  /** Follows a command another client started, from the start of what is held. */
  attach(id: string, commandId: string, options: RunCommandOptions): Promise<ExecResult>;
  /** Asks the agent to kill a command's tree (a finished one is left as it is). */
  cancel(id: string, commandId: string, reason: string, signal?: KillSignal): Promise<void>;
  /** Starts a background process; answers its command id at once. */
  startProcess(id: string, step: Extract<CommandStep, { kind?: 'run' }>): Promise<string>;

  readFile(id: string, path: string): Promise<string>;
  writeFile(
    id: string,
    path: string,
    content: string | Uint8Array,
    mode: number | undefined,
  ): Promise<number>;
  listFiles(
    id: string,
    path: string,
    options: { maxDepth: number; maxEntries: number },
  ): Promise<{ entries: FileEntry[]; truncated: boolean }>;
  grep(
    id: string,
    pattern: string,
    options: GrepOptions,
  ): Promise<{ matches: GrepMatch[]; truncated: boolean }>;
  upload(
    id: string,
    tar: Readable,
    remoteDir: string,
    maxBytes: number | undefined,
  ): Promise<{ bytes: number; files: number }>;
  download(id: string, remotePath: string, maxBytes: number | undefined): Readable;

  /** Captures its files into a new snapshot (pod-lifecycle, snapshot-processor.ts). */
  snapshot(
    id: string,
    options: { name?: string | undefined; timeoutSeconds?: number | undefined },
  ): Promise<SnapshotInfo>;
  /** Stops its running commands, then makes its files exactly the snapshot's. */
  restore(id: string, snapshotId: string, timeoutSeconds?: number): Promise<RestoreResult>;
  /** Snapshot, then `count` sandboxes created from it (the snapshot is deleted after); their ids. */
  fork(id: string, count: number, timeoutSeconds?: number): Promise<string[]>;
  listSnapshots(): Promise<SnapshotInfo[]>;
  getSnapshot(snapshotId: string): Promise<SnapshotInfo | null>;
  /** False when there was none (or it is another tenant's). */
  deleteSnapshot(snapshotId: string): Promise<boolean>;
  /** A preview URL of one of its ports (sandbox-ports.ts); a private one carries its token. */
  portUrl(id: string, port: number, options: PortUrlRequest): Promise<string>;
  /** Replaces its egress policy while it runs (pod-lifecycle, network-processor.ts); the policy applied. */
  updateNetwork(id: string, network: NetworkPolicy): Promise<NetworkPolicy>;

  /** Runs a watch step (a directory's changes as stdout lines) and follows it until it ends. */
  watch(
    id: string,
    step: Extract<CommandStep, { kind: 'watch' }>,
    options: RunCommandOptions,
  ): Promise<ExecResult>;

  /** Input for a running command's open stdin (run steps with stdinStream; wire command-input.ts). */
  writeStdin(id: string, commandId: string, data: Buffer): Promise<void>;
  closeStdin(id: string, commandId: string): Promise<void>;

  openTerminal(id: string, options: TerminalOptions): Promise<TerminalChannel>;
  attachTerminal(id: string, commandId: string): Promise<TerminalChannel>;
}

export interface TerminalOutputOptions {
  /** `start`: what the output stream still holds (its last ~2,000 chunks), then live. `now`: only what comes next. */
  from?: 'start' | 'now';
  signal?: AbortSignal;
}

/** One terminal as a transport carries it (the Terminal class is its public face). */
export interface TerminalChannel {
  /** The command id, as in the sandbox's history. */
  readonly id: string;
  /** The id its Redis keys are named by (over HTTP: the same as `id`). */
  readonly terminalId: string;
  write(data: Buffer): Promise<void>;
  resize(cols: number, rows: number): Promise<void>;
  kill(): Promise<void>;
  wait(): Promise<ExecResult>;
  output(options: TerminalOutputOptions): AsyncGenerator<Buffer>;
}
