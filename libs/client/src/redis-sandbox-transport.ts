import { randomBytes, randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CommandRecordSchema,
  type CommandStep,
  isScopedJobId,
  isTerminal,
  JobStateSchema,
  type JobStore,
  jobStatesOf,
  type LiveSandboxSpec,
  newSnapshotId,
  parseLiveSandboxSpec,
  parseNetworkFailure,
  parseSnapshotFailure,
  type SandboxRecord,
  SnapshotRecordSchema,
  type SnapshotRecords,
  sandboxRecordOf,
  scopedJobId,
} from '@sandstream/bus';
import type { NetworkPolicy, StepResult } from '@sandstream/wire';
import { kernelReplacedState } from './code-context-record.js';
import { executionOf } from './code-execution.js';
import type { ExecResult } from './command-output.js';
import {
  followCommand,
  pushCommand,
  type RunCommandOptions,
  refusal,
  runCommand,
  sendCancel,
} from './command-runner.js';
import { newTransferId, receiveTar, sendTar } from './file-transfer.js';
import { sendCommandInput } from './redis-command-stdin.js';
import type { RedisSandboxContext } from './redis-sandbox-context.js';
import { redisPortUrl } from './redis-sandbox-ports.js';
import { RedisTerminalChannel } from './redis-terminal-channel.js';
import {
  SandboxClosedError,
  SandboxCommandNotFoundError,
  SandboxConflictError,
  SandboxFileError,
  SandboxLimitError,
  SandboxNotFoundError,
  SandboxPauseUnsupportedError,
  SandboxTimeoutError,
  SnapshotCorruptError,
  SnapshotNotFoundError,
} from './sandbox-errors.js';
import type { CommandHistoryEntry, SandboxStats } from './sandbox-history.js';
import type {
  CreateSandboxOptions,
  GrepOptions,
  ListSandboxesOptions,
  TerminalOptions,
} from './sandbox-options.js';
import type { PauseResult } from './sandbox-pause-result.js';
import type { PortUrlRequest } from './sandbox-ports.js';
import { waitReadyByEvent } from './sandbox-ready-watch.js';
import { waitPaused } from './sandbox-wait.js';
import { type RestoreResult, type SnapshotInfo, snapshotInfoOf } from './snapshots.js';
import type {
  CodeCommand,
  CreatedSandbox,
  KillSignal,
  RunStep,
  SandboxEndsAt,
  SandboxTransport,
  TerminalChannel,
} from './transport.js';

/** How long close() waits for the services to end the sandbox before it gives up waiting. */
const CLOSE_WAIT_MS = 120_000;

/**
 * Live sandboxes over Redis: commands pushed to the sandbox's list, followed on its events
 * stream, file trees as chunked transfer lists, all read and written directly (inside the
 * cluster, where the client may reach Redis).
 */
export class RedisSandboxTransport implements SandboxTransport {
  constructor(private readonly ctx: RedisSandboxContext) {}

  forTenant(tenant: string): RedisSandboxTransport {
    return new RedisSandboxTransport({ ...this.ctx, tenant, commands: this.ctx.commands.forTenant(tenant) });
  }

  async create(
    spec: LiveSandboxSpec,
    _input: unknown,
    options: CreateSandboxOptions,
  ): Promise<CreatedSandbox> {
    const { jobId, created } = await this.ctx.submit(spec);
    if (!created) {
      // The same request again (a retry after a timeout) gets the same sandbox; an id that names
      // a job, or another tenant's sandbox, is refused rather than handed over.
      const existing = await this.get(jobId);
      if (!existing || existing.tenant !== spec.tenant) {
        throw new SandboxConflictError(
          `id ${jobId} is taken${existing ? ' by another tenant' : ' by a job'}`,
        );
      }
    }
    // A sandbox from a snapshot gets its files from pod-lifecycle before it is running (no step here).
    if (options.wait === false) return { id: jobId };
    return { id: jobId, record: await this.waitReady(jobId, options) };
  }

  async snapshot(
    id: string,
    options: { name?: string | undefined; timeoutSeconds?: number | undefined },
  ): Promise<SnapshotInfo> {
    const record = await this.get(id);
    if (!record || (this.ctx.tenant && record.tenant !== this.ctx.tenant)) throw new SandboxNotFoundError(id);
    try {
      const taken = await this.ctx.snapshotRequests.capture(
        {
          op: 'capture',
          sandboxId: id,
          snapshotId: newSnapshotId(),
          tenant: record.tenant,
          ...(options.name ? { name: options.name } : {}),
        },
        (options.timeoutSeconds ?? SNAPSHOT_WAIT_SECONDS) * 1000,
      );
      return snapshotInfoOf(SnapshotRecordSchema.parse(taken));
    } catch (err) {
      throw snapshotErrorOf(err as Error, id);
    }
  }

  async restore(id: string, snapshotId: string, timeoutSeconds?: number): Promise<RestoreResult> {
    const record = await this.ctx.store.get(id);
    if (record?.kind !== 'sandbox' || (this.ctx.tenant && record.tenant !== this.ctx.tenant))
      throw new SandboxNotFoundError(id);
    if (!(await this.ctx.snapshotRecords.get(snapshotId, record.tenant)))
      throw new SnapshotNotFoundError(snapshotId);
    // Commands still running would write over the restored files: killed first, and named.
    const running = Object.keys(record.commands).filter((commandId) => !(commandId in record.stepResults));
    await Promise.all(
      running.map((commandId) =>
        sendCancel(this.ctx, id, commandId, 'stopped for a snapshot restore', 'SIGKILL'),
      ),
    );
    await waitCommandsEnded(this.ctx.store, id, running);
    try {
      const done = await this.ctx.snapshotRequests.restore(
        { op: 'restore', sandboxId: id, snapshotId, tenant: record.tenant },
        (timeoutSeconds ?? SNAPSHOT_WAIT_SECONDS) * 1000,
      );
      return { ...done, stoppedCommands: running };
    } catch (err) {
      throw snapshotErrorOf(err as Error, id);
    }
  }

  async fork(id: string, count: number, timeoutSeconds?: number): Promise<string[]> {
    const source = await this.get(id);
    if (!source || (this.ctx.tenant && source.tenant !== this.ctx.tenant)) throw new SandboxNotFoundError(id);
    const snapshotId = newSnapshotId();
    // A fork of a tenant-scoped sandbox (made through the API) is scoped the same way, so its
    // tenant finds it by the id the API answers (tenant-ids.ts). Chosen before the capture: it
    // names them, and pod-lifecycle drops the snapshot once they hold their files.
    const forkIds = Array.from({ length: count }, () =>
      isScopedJobId(id) ? scopedJobId(source.tenant, randomUUID()) : randomUUID(),
    );
    // The forks are created while their snapshot is captured: each start makes its sandbox and
    // boots its agent meanwhile, then waits for the snapshot (start-from-snapshot.ts).
    const captured = this.ctx.snapshotRequests.capture(
      {
        op: 'capture',
        sandboxId: id,
        snapshotId,
        tenant: source.tenant,
        name: `fork of ${id}`,
        forFork: true,
        forks: forkIds,
      },
      (timeoutSeconds ?? SNAPSHOT_WAIT_SECONDS) * 1000,
    );
    captured.catch(() => {});
    // Not before the capture has recorded it (uploading): a start that found no record would
    // refuse it as missing.
    await snapshotBegun(this.ctx.snapshotRecords, snapshotId, source.tenant, captured).catch((err) => {
      throw snapshotErrorOf(err as Error, id);
    });
    const { id: _id, fromSnapshot: _from, ...spec } = source.spec;
    const forks = await Promise.allSettled(
      forkIds.map((forkId) => {
        const forked = parseLiveSandboxSpec({ ...spec, id: forkId, fromSnapshot: snapshotId });
        return this.create(forked, forked, { ...(timeoutSeconds ? { timeoutSeconds } : {}) }).then(
          (created) => created.id,
        );
      }),
    );
    // Running, each fork holds its files: the answer does not wait for the capture's upload and
    // commit (a fork on another node did, to read it), and pod-lifecycle drops the snapshot.
    if (forks.every((fork) => fork.status === 'fulfilled')) return forks.map((fork) => fork.value);
    // One failed: none is left. A failed capture is the cause of every fork's failure (their
    // snapshot went, or never became ready), so its error is the one reported.
    await Promise.all(
      forks.map((fork) => (fork.status === 'fulfilled' ? this.close(fork.value).catch(() => {}) : undefined)),
    );
    await captured.catch((err) => {
      throw snapshotErrorOf(err as Error, id);
    });
    throw (forks.find((fork) => fork.status === 'rejected') as PromiseRejectedResult).reason;
  }

  async listSnapshots(): Promise<SnapshotInfo[]> {
    return (await this.ctx.snapshotRecords.list(this.ctx.tenant)).map(snapshotInfoOf);
  }

  async getSnapshot(snapshotId: string): Promise<SnapshotInfo | null> {
    const record = await this.ctx.snapshotRecords.get(snapshotId, this.ctx.tenant);
    return record ? snapshotInfoOf(record) : null;
  }

  deleteSnapshot(snapshotId: string): Promise<boolean> {
    // The record goes now (the quota with it); the reaper deletes the stored bytes it no longer names.
    return this.ctx.snapshotRecords.delete(snapshotId, this.ctx.tenant);
  }

  async connect(id: string, options: CreateSandboxOptions): Promise<void> {
    await this.waitReady(id, options);
    await this.ctx.commands.touch(id);
  }

  private waitReady(id: string, options: CreateSandboxOptions): Promise<SandboxRecord> {
    return waitReadyByEvent(
      this.ctx.readiness,
      (sandboxId) => this.get(sandboxId),
      id,
      options.timeoutSeconds,
      options.signal,
    );
  }

  async get(id: string): Promise<SandboxRecord | null> {
    const record = await this.ctx.store.get(id);
    return record ? sandboxRecordOf(record) : null;
  }

  async list(options: ListSandboxesOptions): Promise<SandboxRecord[]> {
    const limit = options.limit ?? 100;
    const states = options.state ? jobStatesOf(options.state) : JobStateSchema.options;
    const found = new Map<string, SandboxRecord>();
    for (const state of states) {
      const records = await this.ctx.store.list({
        state,
        limit: 1000,
        ...(options.tenant ? { tenant: options.tenant } : {}),
      });
      for (const record of records) {
        const sandbox = sandboxRecordOf(record);
        if (!sandbox) continue;
        if (options.state && sandbox.state !== options.state) continue;
        if (!Object.entries(options.labels ?? {}).every(([k, v]) => sandbox.labels[k] === v)) continue;
        found.set(sandbox.id, sandbox);
      }
    }
    return [...found.values()].sort((a, b) => b.createdAt - a.createdAt).slice(0, limit);
  }

  async close(id: string): Promise<SandboxRecord> {
    await this.ctx.requestClose(id);
    return waitEnded(this.ctx.store, id);
  }

  async pause(id: string): Promise<PauseResult> {
    const asked = await this.ctx.requestPause(id);
    if (asked.status === 'missing') throw new SandboxNotFoundError(id);
    if (asked.status === 'unsupported') throw new SandboxPauseUnsupportedError(id, asked.reason);
    if (asked.status === 'limit') throw new SandboxLimitError(asked.message);
    if (asked.status === 'refused') {
      const sandbox = await this.get(id);
      if (!sandbox) throw new SandboxNotFoundError(id);
      throw new SandboxClosedError(
        id,
        sandbox.state,
        sandbox.reason,
        asked.closing ? 'a close was asked first' : 'only a ready sandbox can pause',
      );
    }
    const sandbox = await waitPaused((sandboxId) => this.get(sandboxId), id);
    return { sandbox, stoppedCommands: asked.status === 'requested' ? asked.stopping : [] };
  }

  async resume(id: string, options: CreateSandboxOptions): Promise<SandboxRecord> {
    let resumed = await this.ctx.requestResume(id);
    if (resumed.status === 'pausing') {
      // Asked while its pause is still keeping its files: once they are kept, resume.
      await waitPaused((sandboxId) => this.get(sandboxId), id);
      resumed = await this.ctx.requestResume(id);
    }
    if (resumed.status === 'missing') throw new SandboxNotFoundError(id);
    if (resumed.status === 'not-paused') {
      const sandbox = await this.get(id);
      if (!sandbox) throw new SandboxNotFoundError(id);
      // Resumed already (by another client, say), or still pausing: wait for it as for a create.
      // A sandbox that ended, or that is still pausing, is refused by waitReady with its state.
      if (sandbox.state === 'closed' || sandbox.state === 'failed' || sandbox.state === 'closing')
        throw new SandboxClosedError(id, sandbox.state, sandbox.reason, sandbox.message);
    }
    if (options.wait !== false) await this.waitReady(id, options);
    const sandbox = await this.get(id);
    if (!sandbox) throw new SandboxNotFoundError(id);
    return sandbox;
  }

  async keepAlive(id: string): Promise<void> {
    if (await this.ctx.commands.touch(id)) return;
    throw await refusal(this.ctx, id, { status: 'closing' });
  }

  async setTimeout(id: string, seconds: number): Promise<SandboxEndsAt> {
    const asked = await this.ctx.requestTimeout(id, seconds, this.ctx.tenant ?? '');
    if (asked.status === 'set') return { endsAt: asked.endsAt, capped: asked.capped };
    const sandbox = await this.get(id);
    if (asked.status === 'missing' || !sandbox) throw new SandboxNotFoundError(id);
    throw new SandboxClosedError(
      id,
      sandbox.state,
      sandbox.reason,
      asked.closing ? 'it is closing' : 'only a ready sandbox has a lifetime to move',
    );
  }

  async history(id: string): Promise<CommandHistoryEntry[]> {
    const record = await this.ctx.store.get(id);
    if (record?.kind !== 'sandbox') throw new SandboxNotFoundError(id);
    const entries: CommandHistoryEntry[] = [];
    for (const raw of Object.values(record.commands)) {
      const parsed = CommandRecordSchema.safeParse(raw);
      if (parsed.success) entries.push({ ...parsed.data, result: record.stepResults[parsed.data.id] });
    }
    return entries.sort((a, b) => numberOf(a.id) - numberOf(b.id));
  }

  portUrl(id: string, port: number, options: PortUrlRequest): Promise<string> {
    return redisPortUrl(this.ctx, id, port, options);
  }

  async updateNetwork(id: string, network: NetworkPolicy): Promise<NetworkPolicy> {
    const record = await this.ctx.store.get(id);
    if (record?.kind !== 'sandbox' || (this.ctx.tenant && record.tenant !== this.ctx.tenant))
      throw new SandboxNotFoundError(id);
    try {
      return await this.ctx.networkRequests.update(
        { sandboxId: id, tenant: record.tenant, network },
        NETWORK_WAIT_MS,
      );
    } catch (err) {
      const { code, message } = parseNetworkFailure((err as Error).message);
      if (code === 'not-found') throw new SandboxNotFoundError(id);
      if (code === 'conflict' || code === 'unsupported' || code === 'refused')
        throw new SandboxConflictError(message);
      throw err;
    }
  }

  async stats(id: string): Promise<SandboxStats> {
    const { result } = await runCommand(this.ctx, id, { kind: 'stats', workingDirectory: null });
    const record = await this.ctx.store.get(id);
    if (result.output?.kind !== 'stats')
      throw new SandboxFileError(result.errorMessage ?? 'stats failed', result.errorCode);
    const { kind: _kind, ...usage } = result.output;
    const recorded = Object.values(record?.stepResults ?? {});
    return {
      ...usage,
      commandsRun: record?.commandSeq ?? 0,
      commandsRunning: record?.commandsRunning ?? 0,
      outputLines: recorded.reduce((sum, r) => sum + (r.outputLines ?? 0), 0),
      diskBytes: record?.disk?.usedBytes ?? null,
      diskLimitBytes: record?.disk?.limitBytes ?? null,
    };
  }

  async run(id: string, step: RunStep, options: RunCommandOptions): Promise<ExecResult> {
    const run = await runCommand(this.ctx, id, step, options);
    return run.output.result(run.commandId, run.result);
  }

  async runCode(id: string, step: CodeCommand, options: RunCommandOptions) {
    const run = await runCommand(this.ctx, id, step, options);
    const execution = executionOf(run.output.result(run.commandId, run.result), run.result);
    if (await kernelReplacedState(this.ctx.redis, this.ctx.keys, id, run.result)) execution.stateLost = true;
    return execution;
  }

  async attach(id: string, commandId: string, options: RunCommandOptions): Promise<ExecResult> {
    const record = await this.ctx.store.get(id);
    if (record?.kind !== 'sandbox') throw new SandboxNotFoundError(id);
    if (!(commandId in record.commands) && !(commandId in record.stepResults)) {
      throw new SandboxCommandNotFoundError(id, commandId);
    }
    const run = await followCommand(this.ctx, id, commandId, '0-0', options);
    return run.output.result(run.commandId, run.result);
  }

  cancel(id: string, commandId: string, reason: string, signal?: KillSignal): Promise<void> {
    return sendCancel(this.ctx, id, commandId, reason, signal);
  }

  async startProcess(id: string, step: Extract<CommandStep, { kind?: 'run' }>): Promise<string> {
    const pushed = await pushCommand(this.ctx, id, step);
    if (pushed.status !== 'pushed') throw await refusal(this.ctx, id, pushed);
    return pushed.commandId;
  }

  async readFile(id: string, path: string): Promise<string> {
    const output = await this.fileStep(id, { kind: 'readFile', path, workingDirectory: null });
    return output?.kind === 'readFile' ? output.content : '';
  }

  async writeFile(
    id: string,
    path: string,
    content: string | Uint8Array,
    mode: number | undefined,
  ): Promise<number> {
    const binary = typeof content !== 'string';
    const output = await this.fileStep(id, {
      kind: 'writeFile',
      path,
      content: binary ? Buffer.from(content).toString('base64') : content,
      encoding: binary ? 'base64' : 'utf8',
      workingDirectory: null,
      ...(mode !== undefined ? { mode } : {}),
    });
    return output?.kind === 'writeFile' ? output.bytesWritten : 0;
  }

  async listFiles(id: string, path: string, options: { maxDepth: number; maxEntries: number }) {
    const output = await this.fileStep(id, { kind: 'listFiles', path, workingDirectory: null, ...options });
    return output?.kind === 'listFiles'
      ? { entries: output.entries, truncated: output.truncated }
      : { entries: [], truncated: false };
  }

  async grep(id: string, pattern: string, options: GrepOptions) {
    const output = await this.fileStep(id, {
      kind: 'grep',
      pattern,
      path: options.path ?? '.',
      workingDirectory: null,
      ignoreCase: options.ignoreCase ?? false,
      fixedStrings: options.fixedStrings ?? false,
      maxMatches: options.maxMatches ?? 200,
      ...(options.glob !== undefined ? { glob: options.glob } : {}),
    });
    return output?.kind === 'grep'
      ? { matches: output.matches, truncated: output.truncated }
      : { matches: [], truncated: false };
  }

  async upload(id: string, tar: Readable, remoteDir: string, maxBytes: number | undefined) {
    const transfer = newTransferId();
    const done = runCommand(this.ctx, id, {
      kind: 'upload',
      path: remoteDir,
      transfer,
      workingDirectory: null,
      ...(maxBytes !== undefined ? { maxBytes } : {}),
    });
    const [{ result }] = await Promise.all([done, sendTar(this.ctx, id, transfer, tar, done)]);
    if (result.errorMessage !== null) throw new SandboxFileError(result.errorMessage, result.errorCode);
    return result.output?.kind === 'upload'
      ? { bytes: result.output.bytes, files: result.output.files }
      : { bytes: 0, files: 0 };
  }

  download(id: string, remotePath: string, maxBytes: number | undefined): Readable {
    const transfer = newTransferId();
    const done = runCommand(this.ctx, id, {
      kind: 'download',
      path: remotePath,
      transfer,
      workingDirectory: null,
      ...(maxBytes !== undefined ? { maxBytes } : {}),
    });
    const tar = receiveTar(this.ctx, id, transfer, done);
    done.then(
      ({ result }) => {
        if (result.errorMessage !== null)
          tar.destroy(new SandboxFileError(result.errorMessage, result.errorCode));
      },
      (err: Error) => tar.destroy(err),
    );
    return tar;
  }

  async watch(
    id: string,
    step: Extract<CommandStep, { kind: 'watch' }>,
    options: RunCommandOptions,
  ): Promise<ExecResult> {
    const run = await runCommand(this.ctx, id, step, options);
    return run.output.result(run.commandId, run.result);
  }

  writeStdin(id: string, commandId: string, data: Buffer): Promise<void> {
    return sendCommandInput(this.ctx, id, commandId, { kind: 'data', data });
  }

  closeStdin(id: string, commandId: string): Promise<void> {
    return sendCommandInput(this.ctx, id, commandId, { kind: 'end' });
  }

  async openTerminal(id: string, options: TerminalOptions): Promise<TerminalChannel> {
    const terminalId = randomBytes(12).toString('base64url');
    const pushed = await pushCommand(this.ctx, id, {
      kind: 'terminal',
      terminal: terminalId,
      ...(options.command ? { command: options.command } : {}),
      ...(options.cols !== undefined ? { cols: options.cols } : {}),
      ...(options.rows !== undefined ? { rows: options.rows } : {}),
      env: options.env ?? null,
      workingDirectory: options.cwd ?? null,
      ...(options.timeoutSeconds !== undefined ? { timeoutSeconds: options.timeoutSeconds } : {}),
    });
    if (pushed.status !== 'pushed') throw await refusal(this.ctx, id, pushed);
    return new RedisTerminalChannel(id, pushed.commandId, terminalId, this.ctx);
  }

  async attachTerminal(id: string, commandId: string): Promise<TerminalChannel> {
    const record = await this.ctx.store.get(id);
    if (record?.kind !== 'sandbox') throw new SandboxNotFoundError(id);
    const raw = record.commands[commandId] as { kind?: unknown; terminal?: unknown } | undefined;
    if (raw?.kind !== 'terminal' || typeof raw.terminal !== 'string') {
      throw new SandboxCommandNotFoundError(id, commandId);
    }
    return new RedisTerminalChannel(id, commandId, raw.terminal, this.ctx);
  }

  private async fileStep(id: string, step: CommandStep): Promise<StepResult['output']> {
    const { result } = await runCommand(this.ctx, id, step);
    if (result.errorMessage !== null) throw new SandboxFileError(result.errorMessage, result.errorCode);
    return result.output;
  }
}

/** How long a policy change is waited for: pod-lifecycle rewrites one chain. */
const NETWORK_WAIT_MS = 30_000;
/** How long a capture or restore is waited for unless the caller says. */
const SNAPSHOT_WAIT_SECONDS = 600;

/**
 * Resolves once the capture has recorded its snapshot (or finished); throws its failure when it
 * failed first (a quota refusal, a source that is not running).
 */
async function snapshotBegun(
  records: Pick<SnapshotRecords, 'read'>,
  snapshotId: string,
  tenant: string,
  captured: Promise<unknown>,
): Promise<void> {
  const settled = captured.then(
    () => 'done' as const,
    () => 'failed' as const,
  );
  let pauseMs = 2;
  for (;;) {
    if ((await records.read(snapshotId, tenant)) !== null) return;
    const outcome = await Promise.race([settled, sleep(pauseMs).then(() => 'waiting' as const)]);
    if (outcome === 'failed') await captured;
    if (outcome === 'done') return;
    // Short pauses: the forks' creates wait on this, and the record is written within milliseconds.
    pauseMs = Math.min(pauseMs * 2, 10);
  }
}
/** How long the killed commands of a restore get to record their results. */
const STOP_WAIT_MS = 30_000;

/** Waits until each command has its result recorded (a killed one records `cancelled`). */
async function waitCommandsEnded(store: JobStore, id: string, commandIds: string[]): Promise<void> {
  if (commandIds.length === 0) return;
  const deadline = Date.now() + STOP_WAIT_MS;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const record = await store.get(id);
    if (!record || commandIds.every((c) => c in record.stepResults)) return;
    if (Date.now() > deadline)
      throw new SandboxTimeoutError(
        `commands of sandbox ${id} did not stop within ${STOP_WAIT_MS} ms before the restore`,
      );
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/** pod-lifecycle's failure (snapshot-requests.ts codes) as the SDK's typed error. */
export function snapshotErrorOf(err: Error, sandboxId: string): Error {
  const { code, message } = parseSnapshotFailure(err.message);
  switch (code) {
    case 'not-found': {
      const snapshot = /^snapshot (\S+) not found/.exec(message);
      return snapshot
        ? new SnapshotNotFoundError(snapshot[1] as string)
        : new SandboxNotFoundError(sandboxId);
    }
    case 'limit:count':
    case 'limit:bytes':
      return new SandboxLimitError(message);
    case 'corrupt':
      return new SnapshotCorruptError(message);
    case 'conflict':
      return new SandboxConflictError(message);
    default:
      return err.message.startsWith('failed: ') ? new Error(message) : err;
  }
}

/** Polls until the sandbox is closed or failed (close() waits for its teardown to begin). */
export async function waitEnded(store: JobStore, id: string): Promise<SandboxRecord> {
  const deadline = Date.now() + CLOSE_WAIT_MS;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const record = await store.get(id);
    const sandbox = record ? sandboxRecordOf(record) : null;
    if (!record || !sandbox) throw new SandboxNotFoundError(id);
    if (isTerminal(record.state)) return sandbox;
    if (Date.now() > deadline)
      throw new SandboxTimeoutError(`sandbox ${id} still ${sandbox.state} after close`);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

function numberOf(commandId: string): number {
  return Number(commandId.slice(commandId.lastIndexOf('-') + 1)) || 0;
}
