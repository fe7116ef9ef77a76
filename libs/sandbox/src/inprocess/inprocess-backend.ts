import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, openSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { constants, hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pollUntil } from '@sandstream/poll';
import { describeEgress, egressOf, formatIssues, JobIdSchema } from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { agentArgs, agentEnvironment } from '../agent-command.js';
import { waitForAgent } from '../agent-readiness.js';
import { requestAgentShutdown } from '../agent-shutdown.js';
import {
  type CreateSandboxRequest,
  type DestroyOptions,
  type FilesCapture,
  type FilesCopied,
  type FilesRestored,
  type ListOptions,
  type SandboxBackend,
  type SandboxDiskUsage,
  type SandboxInfo,
  SandboxLabels,
  type SandboxRef,
  SandboxStartError,
  type WaitReadyOptions,
} from '../backend.js';
import { allocatedBytes } from '../disk-usage.js';
import { describeCrash, readLogTail } from '../log-tail.js';
import { memoryToBytes } from '../quantity.js';
import { DEFAULT_RESOURCE_POLICY, type ResourcePolicy } from '../resource-policy.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { resolveSecretEnv } from '../secret-env.js';
import { childExit } from './child-exit.js';
import {
  captureInProcess,
  copyInProcess,
  restoreCopyInProcess,
  restoreInProcess,
} from './inprocess-snapshot.js';
import { findMarker, MarkerCache, writeMarker } from './local-markers.js';
import {
  isProcessAlive,
  killProcessTree,
  processStartTime,
  terminateProcessGroup,
  thawProcessTree,
} from './process-control.js';
import {
  DEFAULT_INPROCESS_REGISTRY_KEY,
  type InProcessRecord,
  InProcessRegistry,
} from './sandbox-registry.js';
import { createJobDirectories, linkVolumes, removeJobDirectories } from './workspace.js';

/**
 * The agent as the agent package exports it (a declared dependency): its single executable
 * (`@sandstream/agent/executable`), which starts from a V8 snapshot of the loaded agent in about
 * half the CPU of `node` running the bundle (docs/benchmarks.md, "Fast start, part 1"), else the
 * bundle in one file (`@sandstream/agent/bundle`), which starts in less memory than the compiled
 * modules of its main.js. When neither is built (or, in the services image that runs Docker or
 * Kubernetes sandboxes, the package is not installed) this module must still load: create()
 * then says how to build it.
 */
export const DEFAULT_AGENT_ENTRY = resolveAgentEntry();

function resolveAgentEntry(): string {
  // createRequire rather than import.meta.resolve, which vitest's module runner lacks.
  const require = createRequire(import.meta.url);
  for (const specifier of ['@sandstream/agent/executable', '@sandstream/agent/bundle']) {
    try {
      const path = require.resolve(specifier);
      if (existsSync(path)) return path;
    } catch {
      // Not exported (an older agent package) or not installed: the next one.
    }
  }
  return '@sandstream/agent/bundle (package not installed)';
}

/** A JavaScript entry runs under node; anything else (the single executable) runs by itself. */
export function agentCommand(entry: string, nodePath: string): string[] {
  return /\.[cm]?js$/.test(entry) ? [nodePath, entry] : [entry];
}

export interface InProcessBackendOptions {
  /** Registry of running sandboxes and the shutdown step both go through this client. */
  redis: Redis;
  /** The agent's built entry point: `node <agentEntry> …` for a .js/.cjs/.mjs file, else run itself. */
  agentEntry?: string;
  /** The Node binary that runs the agent; defaults to the one running this process. */
  nodePath?: string;
  /** Parent of the per-job state directories (agent log, temporary workspace). */
  root?: string;
  /** Parent of persistent workspaces (`spec.persistentWorkspace.name`). */
  persistentRoot?: string;
  /** Parent of the tenants' volumes (`spec.volumes[].source`); default `<root>/volumes`. */
  volumesRoot?: string;
  registryKey?: string;
  /** Where secretEnv values come from; defaults to this process's environment. */
  secretSource?: Record<string, string | undefined>;
  /**
   * Variables of this process the agent inherits. The rest (service credentials, cloud tokens)
   * stays out of the sandbox: only spec.env, resolved secretEnv and these reach it.
   */
  passEnv?: readonly string[];
  idleTimeoutSeconds?: number;
  /** Time a destroy waits after the shutdown step before killing, unless the call says otherwise. */
  defaultGraceMs?: number;
  /**
   * Lets file steps reach any path (SANDSTREAM_INPROCESS_UNCONFINED_FILES=1). Without it the
   * agent confines them to the job's directory: here no container is the boundary.
   */
  unconfinedFileSteps?: boolean;
  /** Only its disk default applies here (the other resources are not enforced on a child process). */
  resourcePolicy?: ResourcePolicy;
  /**
   * list() reports only sandboxes labelled with this installation (SandboxLabels.installation).
   * The marker folder is host-wide and shared by every installation and namespace on the machine:
   * without it each list() probes every one of their agents for liveness, and pod-lifecycle's
   * disk watch measures their disks. A name (pod-lifecycle's), or a test of a sandbox's labels
   * (the reaper's: its names and every installation id of its Redis, which may change while it
   * runs). Unset: all.
   */
  installation?: string | ((labels: Readonly<Record<string, string>>) => boolean);
  /** How an agent's liveness is read; default kill(0) and its /proc start time (process-control.ts). */
  liveness?: (pid: number, startTime: string | null) => Promise<boolean>;
}

/**
 * HOME is not among them: a sandbox's HOME is its own directory (below), as a container's is
 * its image's. The host's would hand every sandbox the host user's shell start-up files and
 * dotfiles: an interactive bash ran the host's ~/.bashrc, whose `pyenv rehash` waits up to 60 s
 * for a lock file that a terminal killed mid-start leaves behind, and each terminal then hung.
 */
const DEFAULT_PASS_ENV = ['PATH', 'LANG', 'LC_ALL', 'TZ', 'TMPDIR'];

/**
 * Sandboxes as local child processes: no isolation at all, for tests and single-user developer
 * machines. Ignores image, resources, runtimeClass, user and the Kubernetes fields; refuses any
 * network but its default, which it cannot confine.
 */
export class InProcessBackend implements SandboxBackend {
  readonly kind = 'inprocess' as const;
  /** Its directory exists once create() answers, and a restore stops only what runs below the agent. */
  readonly restoresWhileBooting = true;
  private readonly registry: InProcessRegistry;
  private readonly agentEntry: string;
  private readonly root: string;
  /** This host's markers, each read once (list() runs every few seconds in pod-lifecycle). */
  private readonly markers: MarkerCache;
  private readonly persistentRoot: string;
  private readonly volumesRoot: string;
  /** Exit codes of children this process spawned; another process only learns that they are gone. */
  private readonly exits = new Map<number, number | null>();
  private readonly children = new Set<ChildProcess>();

  constructor(private readonly options: InProcessBackendOptions) {
    this.registry = new InProcessRegistry(
      options.redis,
      options.registryKey ?? DEFAULT_INPROCESS_REGISTRY_KEY,
    );
    this.agentEntry = options.agentEntry ?? DEFAULT_AGENT_ENTRY;
    this.root = options.root ?? join(tmpdir(), 'sandstream-inprocess');
    this.markers = new MarkerCache(this.root);
    this.persistentRoot = options.persistentRoot ?? join(this.root, 'persistent');
    this.volumesRoot = options.volumesRoot ?? join(this.root, 'volumes');
  }

  async removeVolume(source: string): Promise<void> {
    await rm(join(this.volumesRoot, source), { recursive: true, force: true });
  }

  async create(request: CreateSandboxRequest): Promise<SandboxRef> {
    const jobId = JobIdSchema.safeParse(request.jobId);
    if (!jobId.success) throw new SandboxStartError('backend_error', formatIssues(jobId.error, 'jobId'));
    const specResult = SandboxSpecSchema.safeParse(request.spec);
    if (!specResult.success)
      throw new SandboxStartError('backend_error', formatIssues(specResult.error, 'spec'));
    const spec = specResult.data;
    const egress = egressOf(spec.network);
    if (egress !== 'internet') {
      // A child process shares this machine's network: nothing here could hold it to less.
      throw new SandboxStartError(
        'backend_error',
        `spec.network ${typeof spec.network === 'string' ? `"${spec.network}"` : `egress ${describeEgress(spec.network.egress)}`}: the in-process backend runs steps as processes on this machine's network and cannot restrict it; it takes only its default ("default" / egress "internet", which here is not confined at all). Use the Docker or Kubernetes backend for egress control`,
      );
    }
    const earlier = await this.registry.get(request.jobId);
    if (earlier) {
      // An earlier attempt of this very create (its caller crashed, or Redis was down after the
      // spawn): replaced, never a failed job. Not adopted: its agent holds that attempt's
      // credentials. Killed without a shutdown step: that step's result would land in the new
      // agent's result list. What it left in Redis is the caller's to free (pod-lifecycle's start
      // frees the footprint of an attempt it resumes, libs/bus sandbox-footprint.ts).
      if (earlier.hostname !== hostname()) {
        throw new SandboxStartError(
          'backend_error',
          `a sandbox for job ${request.jobId} already runs on host ${earlier.hostname}; only that host can replace it`,
        );
      }
      await terminateProcessGroup(earlier.pid, earlier.startTime);
      await removeJobDirectories(earlier);
      await this.registry.remove(earlier.jobId);
      this.exits.delete(earlier.pid);
    }
    if (!spec.command && !existsSync(this.agentEntry)) {
      throw new SandboxStartError(
        'backend_error',
        `agent entry ${this.agentEntry} does not exist: build the agent bundle (npm run build -w @sandstream/agent) or set agentEntry`,
      );
    }
    let secrets: Record<string, string>;
    try {
      secrets = resolveSecretEnv(spec.secretEnv, this.options.secretSource);
    } catch (err) {
      throw new SandboxStartError('backend_error', (err as Error).message);
    }

    const dirs = await createJobDirectories({
      root: this.root,
      persistentRoot: this.persistentRoot,
      jobId: request.jobId,
      persistentName: spec.persistentWorkspace?.name,
    });
    const volumeDirs = await linkVolumes(this.volumesRoot, dirs.workspace, spec.volumes);
    const launch = {
      jobId: request.jobId,
      agent: request.agent,
      workdir: dirs.workspace,
      idleTimeoutSeconds: this.options.idleTimeoutSeconds,
    };
    const inherited: Record<string, string> = {};
    for (const name of this.options.passEnv ?? DEFAULT_PASS_ENV) {
      const value = process.env[name];
      if (value !== undefined) inherited[name] = value;
    }
    const env = {
      HOME: dirs.workspace,
      ...inherited,
      ...spec.env,
      ...secrets,
      ...request.agent.agentEnv,
      ...agentEnvironment(launch),
      ...(this.options.unconfinedFileSteps ? {} : { AGENT_CONFINE_FILES: '1' }),
      // The volumes are linked in from outside the directory: file steps may follow those links.
      ...(volumeDirs.length > 0 ? { AGENT_CONFINE_ALLOW: volumeDirs.join(':') } : {}),
    };
    const [file, ...args] = spec.command ?? [
      ...agentCommand(this.agentEntry, this.options.nodePath ?? process.execPath),
      ...agentArgs(launch),
    ];

    const logPath = join(dirs.stateDir, 'agent.log');
    // The log is a file, not a pipe: the agent must outlive this process (another replica may
    // destroy it), and any process can read the tail of a file for a crash report.
    const logFd = openSync(logPath, 'a', 0o600);
    let child: ChildProcess;
    try {
      child = spawn(file as string, args, {
        cwd: dirs.workspace,
        env,
        detached: true,
        stdio: ['ignore', logFd, logFd],
      });
      await new Promise<void>((resolve, reject) => {
        child.once('spawn', resolve);
        child.once('error', reject);
      });
    } catch (err) {
      await removeJobDirectories(dirs);
      throw new SandboxStartError('agent_crashed', `could not start ${file}: ${(err as Error).message}`);
    } finally {
      closeSync(logFd);
    }
    const pid = child.pid as number;
    this.children.add(child);
    child.once('exit', (code, signal) => {
      // A signal death is reported the way a shell would: 128 + signal number.
      this.exits.set(pid, code ?? (signal ? 128 + (constants.signals[signal] ?? 0) : null));
      this.children.delete(child);
    });
    child.unref();

    const labels: Record<string, string> = {
      ...spec.labels,
      [SandboxLabels.managedBy]: SandboxLabels.managedByValue,
      [SandboxLabels.jobId]: request.jobId,
      [SandboxLabels.tenant]: request.tenant,
      [SandboxLabels.keyStyle]: request.agent.keyStyle,
    };
    if (spec.template) labels[SandboxLabels.template] = spec.template;
    const record: InProcessRecord = {
      jobId: request.jobId,
      tenant: request.tenant,
      pid,
      startTime: await processStartTime(pid),
      hostname: hostname(),
      stateDir: dirs.stateDir,
      workspace: dirs.workspace,
      persistentWorkspace: dirs.persistent,
      keyStyle: request.agent.keyStyle,
      labels,
      createdAt: new Date().toISOString(),
      volumeLimits: spec.volumes.flatMap((v, i) =>
        !v.readOnly && v.sizeLimitBytes !== undefined
          ? [{ volume: v.volume, dir: volumeDirs[i] as string, limitBytes: v.sizeLimitBytes }]
          : [],
      ),
      diskLimitBytes: memoryToBytes(
        spec.resources.limits?.ephemeralStorage ??
          (this.options.resourcePolicy ?? DEFAULT_RESOURCE_POLICY).defaults.disk,
      ),
    };
    // The local marker first: it is what still names the sandbox if Redis loses the registry.
    await writeMarker(record);
    await this.registry.put(record);
    return { jobId: request.jobId, backend: 'inprocess', id: String(pid) };
  }

  async waitReady(ref: SandboxRef, deadlineMs: number, options: WaitReadyOptions): Promise<void> {
    const record = await this.registry.get(ref.jobId);
    if (!record)
      throw new SandboxStartError('backend_error', `no in-process sandbox is recorded for job ${ref.jobId}`);
    const child = [...this.children].find((c) => c.pid === record.pid);
    const outcome = await waitForAgent({
      deadlineMs,
      options,
      // kill(0) and a /proc read: cheap, and only every LIVENESS_CHECK_MS while the agent boots.
      ended: async () => ((await this.isAlive(record)) ? undefined : ('exited' as const)),
      // A child of this process reports its exit at once; another replica's agent is only checked.
      ...(child ? { endedSignal: once(child, 'exit') } : {}),
    });
    if (outcome.kind === 'ready') return;
    if (outcome.kind === 'ended') {
      const lines = await readLogTail(join(record.stateDir, 'agent.log'));
      const code = this.exits.has(record.pid) ? (this.exits.get(record.pid) ?? null) : null;
      throw new SandboxStartError('agent_crashed', describeCrash(`agent process ${record.pid}`, code, lines));
    }
    throw new SandboxStartError(
      'deadline',
      `agent for job ${ref.jobId} (pid ${record.pid}) did not heart-beat within ${deadlineMs} ms`,
    );
  }

  async destroy(ref: SandboxRef, options: DestroyOptions = {}): Promise<void> {
    const record = (await this.registry.get(ref.jobId)) ?? (await findMarker(this.root, ref.jobId));
    if (!record) return;
    if (record.hostname !== hostname()) {
      throw new Error(
        `in-process sandbox of job ${ref.jobId} runs on host ${record.hostname}; destroy it from that host`,
      );
    }
    const graceMs = options.graceMs ?? this.options.defaultGraceMs ?? 10_000;
    if (await this.isAlive(record)) {
      await requestAgentShutdown(this.options.redis, record.jobId, record.keyStyle);
      // Our own child reports its exit; another replica's agent (or one started before a restart
      // of this process) can only be watched.
      const child = [...this.children].find((c) => c.pid === record.pid);
      if (child) await childExit(child, graceMs);
      else
        await pollUntil(async () => ((await this.isAlive(record)) ? undefined : true), {
          deadline: Date.now() + graceMs,
          initialIntervalMs: 10,
          maxIntervalMs: 100,
        });
    }
    await terminateProcessGroup(record.pid, record.startTime);
    // A temporary workspace lives inside stateDir; a persistent one lives elsewhere and stays.
    await removeJobDirectories(record);
    await this.registry.remove(record.jobId);
    this.exits.delete(record.pid);
  }

  async list(options: ListOptions = {}): Promise<SandboxInfo[]> {
    // The registry (every host's sandboxes) plus this host's local markers, which still list
    // the sandboxes whose registry entries Redis lost.
    const byJob = new Map<string, InProcessRecord>();
    for (const record of await this.markers.read()) byJob.set(record.jobId, record);
    for (const record of await this.registry.all()) byJob.set(record.jobId, record);
    const here = hostname();
    const { installation } = this.options;
    // Ruled out before any liveness probe: a /proc read per foreign agent is what an idle
    // pod-lifecycle would otherwise pay on every round (issue 32).
    const records = [...byJob.values()].filter((record) => {
      if (installation === undefined) return true;
      if (typeof installation === 'string') return record.labels[SandboxLabels.installation] === installation;
      return installation(record.labels);
    });
    return Promise.all(
      records.map(async (record): Promise<SandboxInfo> => {
        let state: SandboxInfo['state'] = 'unknown';
        if (record.hostname === here && options.state !== false) {
          state = (await this.isAlive(record)) ? 'running' : 'exited';
        }
        return {
          jobId: record.jobId,
          backend: 'inprocess',
          id: String(record.pid),
          tenant: record.tenant,
          labels: record.labels,
          createdAt: new Date(record.createdAt),
          state,
        };
      }),
    );
  }

  /**
   * The job's state directory (workspace, agent log) and a persistent workspace: what the
   * sandbox fills on this host's disk. Processes may write elsewhere (no boundary here): not counted.
   */
  async diskUsage(ref: SandboxRef): Promise<SandboxDiskUsage | undefined> {
    const record = await this.registry.get(ref.jobId);
    if (!record?.diskLimitBytes || record.hostname !== hostname()) return undefined;
    const parts: Record<string, number> = { work: await allocatedBytes(record.stateDir) };
    if (record.persistentWorkspace) parts.workspace = await allocatedBytes(record.workspace);
    const usedBytes = Object.values(parts).reduce((a, b) => a + b, 0);
    const volumes = await Promise.all(
      record.volumeLimits.map(async (v) => ({
        volume: v.volume,
        usedBytes: await allocatedBytes(v.dir),
        limitBytes: v.limitBytes,
      })),
    );
    return {
      usedBytes,
      limitBytes: record.diskLimitBytes,
      enforcement: 'watch',
      quota: false,
      parts,
      volumes,
    };
  }

  /** SIGKILL to the agent and every process below it; destroy removes the rest. */
  async halt(ref: SandboxRef): Promise<void> {
    const record = await this.registry.get(ref.jobId);
    if (!record || record.hostname !== hostname()) return;
    await killProcessTree(record.pid, record.startTime);
  }

  /** Its work directory, the processes below the agent stopped meanwhile (inprocess-snapshot.ts). */
  async captureFiles(ref: SandboxRef): Promise<FilesCapture> {
    return captureInProcess(await this.localRecord(ref, 'snapshot'));
  }

  async restoreFiles(ref: SandboxRef, snapshot: AsyncIterable<Buffer>): Promise<FilesRestored> {
    return restoreInProcess(await this.localRecord(ref, 'restore'), snapshot);
  }

  /** Its work directory as a plain tree under `into`, for a fork on this host (inprocess-snapshot.ts). */
  async copyFiles(ref: SandboxRef, into: string): Promise<FilesCopied> {
    return copyInProcess(await this.localRecord(ref, 'copy'), into);
  }

  async restoreCopy(ref: SandboxRef, from: string): Promise<Pick<FilesRestored, 'removed' | 'frozenMs'>> {
    return restoreCopyInProcess(await this.localRecord(ref, 'restore'), from);
  }

  async thaw(ref: SandboxRef): Promise<void> {
    const record = await this.registry.get(ref.jobId);
    if (!record || record.hostname !== hostname()) return;
    await thawProcessTree(record.pid, record.startTime);
  }

  private async localRecord(ref: SandboxRef, what: string): Promise<InProcessRecord> {
    const record = await this.registry.get(ref.jobId);
    if (!record) throw new Error(`no in-process sandbox is recorded for ${ref.jobId}`);
    if (record.hostname !== hostname())
      throw new Error(
        `in-process sandbox ${ref.jobId} runs on host ${record.hostname}; ${what} it from that host`,
      );
    return record;
  }

  /** Leaves running agents alone: they belong to their jobs, not to this process. */
  async close(): Promise<void> {}

  /** The agent's process exists (a stopped or starved one too); undefined when it runs on another host. */
  /** Its processes share this machine's network: a port they listen on is the loopback's. */
  async portAddress(ref: SandboxRef, port: number): Promise<{ host: string; port: number } | undefined> {
    const record = (await this.registry.get(ref.jobId)) ?? (await findMarker(this.root, ref.jobId));
    if (!record || record.hostname !== hostname()) return undefined;
    return { host: '127.0.0.1', port };
  }

  async isRunning(ref: SandboxRef): Promise<boolean | undefined> {
    const record = (await this.registry.get(ref.jobId)) ?? (await findMarker(this.root, ref.jobId));
    if (!record) return false;
    if (record.hostname !== hostname()) return undefined;
    return this.isAlive(record);
  }

  private async isAlive(record: InProcessRecord): Promise<boolean> {
    if (this.exits.has(record.pid)) return false;
    return (this.options.liveness ?? isProcessAlive)(record.pid, record.startTime);
  }
}
