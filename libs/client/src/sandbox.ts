import { mkdir } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import {
  type CommandRecord,
  CommandRecordSchema,
  type CommandStep,
  type SandboxRecord,
  sandboxRecordOf,
} from '@sandstream/bus';
import {
  type FileEntry,
  type GrepMatch,
  Limits,
  overLimit,
  packTree,
  ShellSessionNameSchema,
  type StepResult,
  stdinBytes,
  unpackTar,
} from '@sandstream/wire';
import { parseOptions } from './client-options.js';
import type { CommandOutputLine, ExecResult } from './command-output.js';
import {
  type CommandRun,
  type CommandRunnerContext,
  followCommand,
  type RunCommandOptions,
  refusal,
  runCommand,
  runStepOf,
  sendCancel,
} from './command-runner.js';
import { newTransferId, receiveTar, sendTar } from './file-transfer.js';
import {
  CommandCancelledError,
  SandboxCommandNotFoundError,
  SandboxFileError,
  SandboxLimitError,
  SandboxNotFoundError,
} from './sandbox-errors.js';
import {
  type AttachOptions,
  AttachOptionsSchema,
  type ExecOptions,
  ExecOptionsSchema,
  type GrepOptions,
  GrepOptionsSchema,
  type ListFilesOptions,
  ListFilesOptionsSchema,
  type ShellRunOptions,
  ShellRunOptionsSchema,
  type TransferOptions,
  TransferOptionsSchema,
  type WriteFileOptions,
  WriteFileOptionsSchema,
} from './sandbox-options.js';
import { SandboxProcesses } from './sandbox-processes.js';
import { SandboxTerminals } from './sandbox-terminals.js';

export interface SandboxContext extends CommandRunnerContext {
  /** Asks the services to close the sandbox (a cancel request with reason `user`). */
  requestClose(sandboxId: string): Promise<void>;
  /** Resolves once the sandbox is closed or failed. */
  waitEnded(sandboxId: string): Promise<SandboxRecord>;
}

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
  /** Commands handed to the sandbox since it opened (the stats call itself included). */
  commandsRun: number;
  commandsRunning: number;
  /** Output lines of the commands still in its history. */
  outputLines: number;
}

/** A named long-lived shell of a sandbox (Sandbox.shell). */
export class ShellSession {
  constructor(
    readonly name: string,
    private readonly send: (command: string, options: ShellRunOptions) => CommandExecution,
  ) {}

  /**
   * Runs a command line in this shell: await it for its result (exit code, output), or iterate
   * it for its output. A command that times out or is cancelled takes the shell down with it;
   * its result says so, and the next command starts a fresh one.
   */
  run(command: string, options: ShellRunOptions = {}): CommandExecution {
    return this.send(command, options);
  }
}

/** An item of a command's output as its async iterator yields it. */
export type ExecItem = CommandOutputLine | { stream: 'gap'; from: number; to: number };

/**
 * A running command: await it for its ExecResult, or iterate it for its output as it comes
 * (then await it, or read `result`, for the end). Starts on the next tick, so an iterator taken
 * right away sees every line.
 */
export class CommandExecution implements PromiseLike<ExecResult>, AsyncIterable<ExecItem> {
  private readonly items: ExecItem[] = [];
  private wake: (() => void) | undefined;
  private done = false;
  private iterating = false;
  readonly result: Promise<ExecResult>;

  constructor(run: (emit: (item: ExecItem) => void) => Promise<ExecResult>) {
    this.result = Promise.resolve()
      .then(() => run((item) => this.push(item)))
      .finally(() => {
        this.done = true;
        this.wake?.();
      });
    // Iterating without awaiting must not leave an unhandled rejection behind.
    this.result.catch(() => {});
  }

  // biome-ignore lint/suspicious/noThenProperty: a CommandExecution is awaited like the promise of its result
  then<A = ExecResult, B = never>(
    onFulfilled?: ((value: ExecResult) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.result.then(onFulfilled, onRejected);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ExecItem> {
    this.iterating = true;
    for (;;) {
      const item = this.items.shift();
      if (item) {
        yield item;
        continue;
      }
      if (this.done) break;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      this.wake = undefined;
    }
    // A failed command ends its iteration with its error.
    await this.result;
  }

  private push(item: ExecItem): void {
    // Only an iterator consumes items: without one, nothing is buffered.
    if (!this.iterating) return;
    this.items.push(item);
    this.wake?.();
  }
}

/**
 * A handle on an open live sandbox (client.sandboxes.create / connect). Every call goes through
 * Redis to the sandbox's agent; any client that knows the id can hold one at the same time.
 */
export class Sandbox implements AsyncDisposable {
  readonly files: SandboxFiles;
  /** Background processes: start, list, follow, kill (sandbox-processes.ts). */
  readonly processes: SandboxProcesses;
  /** Interactive terminals (PTYs): open, attach (sandbox-terminals.ts). */
  readonly terminals: SandboxTerminals;

  constructor(
    readonly id: string,
    private readonly ctx: SandboxContext,
  ) {
    this.files = new SandboxFiles(id, ctx);
    this.processes = new SandboxProcesses(
      id,
      ctx,
      (processId, options) => this.attach(processId, options),
      () => this.history(),
    );
    this.terminals = new SandboxTerminals(id, ctx);
  }

  /**
   * Runs a command: an argv array (exec'd directly) or a string (through `/bin/sh -c`). Runs
   * beside the sandbox's other commands. Output comes to onStdout/onStderr and through the
   * returned execution's async iterator.
   */
  exec(command: string | readonly string[], execOptions: ExecOptions = {}): CommandExecution {
    const options = parseOptions(ExecOptionsSchema, execOptions, 'exec options');
    const step: CommandStep = {
      ...runStepOf(command, options, 'exec'),
      ...(options.timeoutSeconds !== undefined ? { timeoutSeconds: options.timeoutSeconds } : {}),
      ...stdinFields(options.stdin),
    };
    if (stdinBytes(step) > Limits.runStdinMaxBytes) {
      throw new SandboxLimitError(overLimit('stdin', stdinBytes(step), Limits.runStdinMaxBytes));
    }
    return this.execution(options, (runOptions) => runCommand(this.ctx, this.id, step, runOptions));
  }

  /**
   * Follows a command of this sandbox that another client (or an earlier process) started: its
   * output from the start of what the stream still holds, then its result. A command already
   * finished answers at once from its result.
   */
  attach(commandId: string, attachOptions: AttachOptions = {}): CommandExecution {
    const options = parseOptions(AttachOptionsSchema, attachOptions, 'attach options');
    return this.execution(options, async (runOptions) => {
      const record = await this.ctx.store.get(this.id);
      if (record?.kind !== 'sandbox') throw new SandboxNotFoundError(this.id);
      if (!(commandId in record.commands) && !(commandId in record.stepResults)) {
        throw new SandboxCommandNotFoundError(this.id, commandId);
      }
      return followCommand(this.ctx, this.id, commandId, '0-0', runOptions);
    });
  }

  private execution(
    options: AttachOptions & Pick<ExecOptions, 'onStart'>,
    start: (runOptions: RunCommandOptions) => Promise<CommandRun>,
  ): CommandExecution {
    return new CommandExecution(async (emit) => {
      const run = await start({
        maxOutputBytes: options.maxOutputBytes,
        signal: options.signal,
        onStart: options.onStart,
        onLine: (line) => {
          (line.stream === 'stdout' ? options.onStdout : options.onStderr)?.(line.line);
          emit(line);
        },
        onGap: (gap) => {
          options.onGap?.(gap);
          emit({ stream: 'gap', ...gap });
        },
      });
      const result = run.output.result(run.commandId, run.result);
      if (options.signal?.aborted && result.cancelled) throw new CommandCancelledError(result);
      return result;
    });
  }

  /**
   * A long-lived shell of the sandbox by name (started on first use): `run('cd /tmp && export
   * A=1')`, then `run('pwd; echo $A')` prints /tmp and 1. Commands sent to one session run in
   * the order sent; several sessions run side by side.
   */
  shell(name = 'default'): ShellSession {
    return new ShellSession(ShellSessionNameSchema.parse(name), (command, options) => {
      const parsed = parseOptions(ShellRunOptionsSchema, options, 'shell run options');
      const step: CommandStep = {
        kind: 'shell',
        session: name,
        command,
        ...(parsed.timeoutSeconds !== undefined ? { timeoutSeconds: parsed.timeoutSeconds } : {}),
      };
      return this.execution(parsed, (runOptions) => runCommand(this.ctx, this.id, step, runOptions));
    });
  }

  /**
   * Cancels a running command of this sandbox, whoever started it: its whole process tree is
   * killed and its result says `cancelled`. A command already finished is left as it is.
   */
  cancel(commandId: string): Promise<void> {
    return sendCancel(this.ctx, this.id, commandId, 'cancelled by a client');
  }

  /** The sandbox's record now (state, reason, activity). */
  async info(): Promise<SandboxRecord> {
    const record = await this.ctx.store.get(this.id);
    const sandbox = record ? sandboxRecordOf(record) : null;
    if (!sandbox) throw new SandboxNotFoundError(this.id);
    return sandbox;
  }

  /** The commands still in its bounded history, oldest first, with their results once they ended. */
  async history(): Promise<CommandHistoryEntry[]> {
    const record = await this.ctx.store.get(this.id);
    if (record?.kind !== 'sandbox') throw new SandboxNotFoundError(this.id);
    const entries: CommandHistoryEntry[] = [];
    for (const raw of Object.values(record.commands)) {
      const parsed = CommandRecordSchema.safeParse(raw);
      if (parsed.success) entries.push({ ...parsed.data, result: record.stepResults[parsed.data.id] });
    }
    return entries.sort((a, b) => numberOf(a.id) - numberOf(b.id));
  }

  /**
   * Resource use and activity: CPU and memory of the sandbox's cgroup (null where the backend
   * does not give it one of its own to read), workspace size, and the commands it ran.
   */
  async stats(): Promise<SandboxStats> {
    const { result } = await runCommand(this.ctx, this.id, { kind: 'stats', workingDirectory: null });
    const record = await this.ctx.store.get(this.id);
    if (result.output?.kind !== 'stats')
      throw new SandboxFileError(result.errorMessage ?? 'stats failed', result.errorCode);
    const { kind: _kind, ...usage } = result.output;
    const recorded = Object.values(record?.stepResults ?? {});
    return {
      ...usage,
      commandsRun: record?.commandSeq ?? 0,
      commandsRunning: record?.commandsRunning ?? 0,
      outputLines: recorded.reduce((sum, r) => sum + (r.outputLines ?? 0), 0),
    };
  }

  /** Counts as a client call: the sandbox's idle expiry starts again. */
  async keepAlive(): Promise<void> {
    if (await this.ctx.commands.touch(this.id)) return;
    throw await refusal(this.ctx, this.id, { status: 'closing' });
  }

  /** Closes the sandbox (kills everything still running in it). Idempotent. */
  async close(): Promise<SandboxRecord> {
    await this.ctx.requestClose(this.id);
    return this.ctx.waitEnded(this.id);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** File operations on a sandbox's workspace: the agent's file steps, with their limits. */
export class SandboxFiles {
  constructor(
    private readonly sandboxId: string,
    private readonly ctx: SandboxContext,
  ) {}

  /** A UTF-8 text file's content (binary or over the read limit: SandboxFileError). */
  async read(path: string): Promise<string> {
    const output = await this.run({ kind: 'readFile', path, workingDirectory: null });
    return output?.kind === 'readFile' ? output.content : '';
  }

  /** Writes atomically (temp file + rename); creates parent directories. Returns bytes written. */
  async write(
    path: string,
    content: string | Uint8Array,
    writeOptions: WriteFileOptions = {},
  ): Promise<number> {
    const options = parseOptions(WriteFileOptionsSchema, writeOptions, 'write options');
    const binary = typeof content !== 'string';
    const output = await this.run({
      kind: 'writeFile',
      path,
      content: binary ? Buffer.from(content).toString('base64') : content,
      encoding: binary ? 'base64' : 'utf8',
      workingDirectory: null,
      ...(options.mode !== undefined ? { mode: options.mode } : {}),
    });
    return output?.kind === 'writeFile' ? output.bytesWritten : 0;
  }

  async list(
    path = '.',
    listOptions: ListFilesOptions = {},
  ): Promise<{ entries: FileEntry[]; truncated: boolean }> {
    const options = parseOptions(ListFilesOptionsSchema, listOptions, 'list options');
    const output = await this.run({
      kind: 'listFiles',
      path,
      workingDirectory: null,
      maxDepth: options.maxDepth ?? 1,
      maxEntries: options.maxEntries ?? 1000,
    });
    return output?.kind === 'listFiles'
      ? { entries: output.entries, truncated: output.truncated }
      : { entries: [], truncated: false };
  }

  async grep(
    pattern: string,
    grepOptions: GrepOptions = {},
  ): Promise<{ matches: GrepMatch[]; truncated: boolean }> {
    const options = parseOptions(GrepOptionsSchema, grepOptions, 'grep options');
    const output = await this.run({
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

  /**
   * Copies a local file or directory (or a tar stream) into the sandbox directory `remoteDir`
   * (created when missing), as `docker cp` does: a path arrives as `remoteDir/<its name>`. The
   * tree travels as a tar stream in 1 MiB chunks, never as one Redis value; past `maxBytes`
   * (default 1 GiB) it is refused.
   */
  async upload(
    local: string | Readable,
    remoteDir: string,
    transferOptions: TransferOptions = {},
  ): Promise<{ bytes: number; files: number }> {
    const options = parseOptions(TransferOptionsSchema, transferOptions, 'upload options');
    const transfer = newTransferId();
    const tar = typeof local === 'string' ? await packTree(local) : local;
    const done = runCommand(this.ctx, this.sandboxId, {
      kind: 'upload',
      path: remoteDir,
      transfer,
      workingDirectory: null,
      ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}),
    });
    const [{ result }] = await Promise.all([done, sendTar(this.ctx, this.sandboxId, transfer, tar, done)]);
    if (result.errorMessage !== null) throw new SandboxFileError(result.errorMessage, result.errorCode);
    return result.output?.kind === 'upload'
      ? { bytes: result.output.bytes, files: result.output.files }
      : { bytes: 0, files: 0 };
  }

  /**
   * A file or directory of the sandbox as a tar stream (its top entry named like it), read as it
   * comes: the agent waits while this side is slow, so memory stays bounded on both.
   */
  download(remotePath: string, transferOptions: TransferOptions = {}): Readable {
    const options = parseOptions(TransferOptionsSchema, transferOptions, 'download options');
    const transfer = newTransferId();
    const done = runCommand(this.ctx, this.sandboxId, {
      kind: 'download',
      path: remotePath,
      transfer,
      workingDirectory: null,
      ...(options.maxBytes !== undefined ? { maxBytes: options.maxBytes } : {}),
    });
    const tar = receiveTar(this.ctx, this.sandboxId, transfer, done);
    done.then(
      ({ result }) => {
        if (result.errorMessage !== null)
          tar.destroy(new SandboxFileError(result.errorMessage, result.errorCode));
      },
      (err: Error) => tar.destroy(err),
    );
    return tar;
  }

  /** download() unpacked into the local directory `localDir` (created when missing). */
  async downloadTo(
    remotePath: string,
    localDir: string,
    transferOptions: TransferOptions = {},
  ): Promise<void> {
    await mkdir(localDir, { recursive: true });
    await unpackTar(this.download(remotePath, transferOptions), localDir);
  }

  private async run(step: CommandStep): Promise<StepResult['output']> {
    const { result } = await runCommand(this.ctx, this.sandboxId, step);
    if (result.errorMessage !== null) throw new SandboxFileError(result.errorMessage, result.errorCode);
    return result.output;
  }
}

/** A command's stdin as the wire carries it: text as is, bytes in base64. */
function stdinFields(stdin: string | Uint8Array | undefined) {
  if (stdin === undefined) return {};
  if (typeof stdin === 'string') return { stdin };
  return { stdin: Buffer.from(stdin).toString('base64'), stdinEncoding: 'base64' as const };
}

function numberOf(commandId: string): number {
  return Number(commandId.slice(commandId.lastIndexOf('-') + 1)) || 0;
}
