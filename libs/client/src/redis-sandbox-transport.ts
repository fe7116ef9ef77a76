import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import {
  CommandRecordSchema,
  type CommandStep,
  isTerminal,
  JobStateSchema,
  type JobStore,
  jobStatesOf,
  type LiveSandboxSpec,
  type SandboxRecord,
  sandboxRecordOf,
} from '@sandstream/bus';
import type { StepResult } from '@sandstream/wire';
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
import type { RedisSandboxContext } from './redis-sandbox-context.js';
import { redisPortUrl } from './redis-sandbox-ports.js';
import { RedisTerminalChannel } from './redis-terminal-channel.js';
import {
  SandboxCommandNotFoundError,
  SandboxConflictError,
  SandboxFileError,
  SandboxNotFoundError,
  SandboxTimeoutError,
} from './sandbox-errors.js';
import type { CommandHistoryEntry, SandboxStats } from './sandbox-history.js';
import type {
  CreateSandboxOptions,
  GrepOptions,
  ListSandboxesOptions,
  TerminalOptions,
} from './sandbox-options.js';
import type { PortUrlRequest } from './sandbox-ports.js';
import { waitReady } from './sandbox-wait.js';
import type { KillSignal, RunStep, SandboxTransport, TerminalChannel } from './transport.js';

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

  async create(spec: LiveSandboxSpec, _input: unknown, options: CreateSandboxOptions): Promise<string> {
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
    if (options.wait !== false)
      await waitReady((id) => this.get(id), jobId, options.timeoutSeconds, options.signal);
    return jobId;
  }

  async connect(id: string, options: CreateSandboxOptions): Promise<void> {
    await waitReady((sandboxId) => this.get(sandboxId), id, options.timeoutSeconds, options.signal);
    await this.ctx.commands.touch(id);
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

  async keepAlive(id: string): Promise<void> {
    if (await this.ctx.commands.touch(id)) return;
    throw await refusal(this.ctx, id, { status: 'closing' });
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
