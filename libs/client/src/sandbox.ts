import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import {
  type SandboxPauseOptions,
  SandboxPauseOptionsSchema,
  type SandboxRecord,
  SandboxSetTimeoutSchema,
  SnapshotIdSchema,
} from '@sandstream/bus';
import {
  type FileEntry,
  type GrepMatch,
  Limits,
  overLimit,
  packTree,
  ShellSessionNameSchema,
  stdinBytes,
  unpackTar,
} from '@sandstream/wire';
import { parseOptions, SandstreamOptionsError } from './client-options.js';
import {
  type CodeContext,
  type CreateCodeContextOptions,
  CreateCodeContextOptionsSchema,
  type Execution,
  type RunCodeOptions,
  RunCodeOptionsSchema,
} from './code-execution.js';
import { CommandExecution } from './command-execution.js';
import { CommandOutput, type ExecResult } from './command-output.js';
import { type RunCommandOptions, runStepOf } from './command-runner.js';
import { type DirectoryWatch, type WatchOptions, watchDirectory } from './directory-watch.js';
import { type FileContent, writeStream } from './file-write-stream.js';
import { ResultDelivery } from './live-code-results.js';
import {
  CommandCancelledError,
  SandboxLimitError,
  SandboxNotFoundError,
  SnapshotNotFoundError,
} from './sandbox-errors.js';
import type { CommandHistoryEntry, SandboxStats } from './sandbox-history.js';
import { SandboxNetwork } from './sandbox-network.js';
import {
  type AttachOptions,
  AttachOptionsSchema,
  type CreateSandboxOptions,
  CreateSandboxOptionsSchema,
  type ExecOptions,
  ExecOptionsSchema,
  type GrepOptions,
  GrepOptionsSchema,
  type ListFilesOptions,
  ListFilesOptionsSchema,
  type ReadFileOptions,
  ReadFileOptionsSchema,
  type ShellRunOptions,
  ShellRunOptionsSchema,
  type TransferOptions,
  TransferOptionsSchema,
  type WriteFileOptions,
  WriteFileOptionsSchema,
} from './sandbox-options.js';
import type { PauseResult } from './sandbox-pause-result.js';
import { SandboxPorts } from './sandbox-ports.js';
import { SandboxProcesses } from './sandbox-processes.js';
import { SandboxTerminals } from './sandbox-terminals.js';
import { fileOfTar } from './single-file-tar.js';
import {
  type ForkOptions,
  ForkOptionsSchema,
  type RestoreResult,
  type SnapshotInfo,
  type SnapshotOptions,
  SnapshotOptionsSchema,
} from './snapshots.js';
import type { CodeCommand, RunStep, SandboxEndsAt, SandboxTransport } from './transport.js';

export { CommandExecution } from './command-execution.js';

/** An interrupted cell as the ExecResult CommandCancelledError carries. */
function execResultOf(execution: Execution): ExecResult {
  return {
    commandId: execution.commandId,
    exitCode: null,
    durationMs: execution.durationMs,
    timedOut: false,
    cancelled: true,
    stdout: execution.stdout,
    stderr: execution.stderr,
    truncated: false,
    gaps: [],
    errorMessage: execution.error?.value ?? 'cancelled',
    errorCode: 'cancelled',
  };
}

export type { ExecItem } from './command-output.js';
export type { CommandHistoryEntry, SandboxStats } from './sandbox-history.js';
export type { SandboxEndsAt } from './transport.js';

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
  /** Preview URLs of the ports it serves on (sandbox-ports.ts). */
  readonly ports: SandboxPorts;
  /** Its egress policy, changed while it runs (sandbox-network.ts). */
  readonly network: SandboxNetwork;

  constructor(
    readonly id: string,
    private readonly transport: SandboxTransport,
  ) {
    this.files = new SandboxFiles(id, transport);
    this.processes = new SandboxProcesses(
      id,
      transport,
      (processId, options) => this.attach(processId, options),
      () => this.history(),
    );
    this.terminals = new SandboxTerminals(id, transport);
    this.ports = new SandboxPorts(id, transport);
    this.network = new SandboxNetwork(id, transport);
  }

  /**
   * Runs a command: an argv array (exec'd directly) or a string (through `/bin/sh -c`). Runs
   * beside the sandbox's other commands. Output comes to onStdout/onStderr and through the
   * returned execution's async iterator.
   */
  exec(command: string | readonly string[], execOptions: ExecOptions = {}): CommandExecution {
    const options = parseOptions(ExecOptionsSchema, execOptions, 'exec options');
    const step: RunStep = {
      ...runStepOf(command, options, 'exec'),
      ...(options.timeoutSeconds !== undefined ? { timeoutSeconds: options.timeoutSeconds } : {}),
      ...stdinFields(options.stdin),
      ...(options.openStdin ? { stdinStream: true } : {}),
    };
    if (options.openStdin && options.stdin !== undefined) {
      throw new SandstreamOptionsError('exec options: give stdin or openStdin, not both');
    }
    if (stdinBytes(step) > Limits.runStdinMaxBytes) {
      throw new SandboxLimitError(overLimit('stdin', stdinBytes(step), Limits.runStdinMaxBytes));
    }
    return this.execution(options, (runOptions) => this.transport.run(this.id, step, runOptions));
  }

  /**
   * Follows a command of this sandbox that another client (or an earlier process) started: its
   * output from the start of what the stream still holds, then its result. A command already
   * finished answers at once from its result.
   */
  attach(commandId: string, attachOptions: AttachOptions = {}): CommandExecution {
    const options = parseOptions(AttachOptionsSchema, attachOptions, 'attach options');
    return this.execution(
      options,
      (runOptions) => this.transport.attach(this.id, commandId, runOptions),
      commandId,
    );
  }

  /**
   * The one place an abort becomes a cancel, for both transports: once the command's id is
   * known (`known` for attach, else told by the transport's onStart), aborting `signal` asks
   * its agent to kill its tree; the transport follows on to the cancelled result, which then
   * throws CommandCancelledError.
   */
  private execution(
    options: AttachOptions & Pick<ExecOptions, 'onStart'>,
    start: (runOptions: RunCommandOptions) => Promise<ExecResult>,
    known?: string,
  ): CommandExecution {
    return new CommandExecution(async (emit) => {
      const { signal } = options;
      let commandId = known;
      const cancel = () => {
        if (commandId === undefined) return;
        this.transport.cancel(this.id, commandId, 'cancelled by the client').catch(() => {});
      };
      if (signal?.aborted) cancel();
      signal?.addEventListener('abort', cancel, { once: true });
      const stopFollowing = 'stopFollowing' in options ? options.stopFollowing : undefined;
      // What was seen, for the quiet end of a follow stopped before the command ended.
      const seen = stopFollowing ? new CommandOutput(options.maxOutputBytes) : undefined;
      const startedAt = Date.now();
      try {
        const result = await start({
          maxOutputBytes: options.maxOutputBytes,
          stopFollowing,
          onStart: (started) => {
            commandId = started;
            options.onStart?.(started);
            if (signal?.aborted) cancel();
          },
          onLine: (line) => {
            seen?.add(line);
            (line.stream === 'stdout' ? options.onStdout : options.onStderr)?.(line.line);
            emit(line);
          },
          onGap: (gap) => {
            options.onGap?.(gap);
            emit({ stream: 'gap', ...gap });
          },
        });
        if (signal?.aborted && result.cancelled) throw new CommandCancelledError(result);
        return result;
      } catch (err) {
        // Stopping following is the caller's choice, not a failure: the follow ends quietly
        // with what it saw (the command goes on; `stillRunning` says so).
        if (seen && stopFollowing?.aborted && !signal?.aborted && commandId !== undefined) {
          return seen.seenSoFar(commandId, Date.now() - startedAt);
        }
        throw err;
      } finally {
        signal?.removeEventListener('abort', cancel);
      }
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
      const step: RunStep = {
        kind: 'shell',
        session: name,
        command,
        ...(parsed.timeoutSeconds !== undefined ? { timeoutSeconds: parsed.timeoutSeconds } : {}),
      };
      return this.execution(parsed, (runOptions) => this.transport.run(this.id, step, runOptions));
    });
  }

  /**
   * Runs a cell of code in a context of the code interpreter (docs/code-interpreter.md): Python
   * by default, or JavaScript or bash; the context keeps its state between cells. Answers the
   * cell's results (the last expression's value as the main result, plots as PNG, tables as
   * HTML), its output and its exception. A timeout or an abort interrupts the cell and keeps the
   * context's state; an abort then throws CommandCancelledError.
   */
  async runCode(code: string, runOptions: RunCodeOptions = {}): Promise<Execution> {
    const options = parseOptions(RunCodeOptionsSchema, runOptions, 'runCode options');
    const context = typeof options.context === 'object' ? options.context : undefined;
    if (context && options.language !== undefined && options.language !== context.language) {
      throw new SandstreamOptionsError(
        `runCode options: language ${options.language} does not match the context's (${context.language})`,
      );
    }
    const step: CodeCommand = {
      kind: 'code',
      code,
      language: context?.language ?? options.language ?? 'python',
      ...(options.context !== undefined ? { context: context?.id ?? (options.context as string) } : {}),
      workingDirectory: context?.cwd ?? null,
      ...(options.timeoutSeconds !== undefined ? { timeoutSeconds: options.timeoutSeconds } : {}),
    };
    const { signal } = options;
    let commandId: string | undefined;
    const cancel = () => {
      if (commandId === undefined) return;
      this.transport.cancel(this.id, commandId, 'cancelled by the client').catch(() => {});
    };
    signal?.addEventListener('abort', cancel, { once: true });
    const results = new ResultDelivery(options.onResult);
    try {
      const execution = await this.transport.runCode(this.id, step, {
        onStart: (started) => {
          commandId = started;
          options.onStart?.(started);
          if (signal?.aborted) cancel();
        },
        onLine: (line) => (line.stream === 'stdout' ? options.onStdout : options.onStderr)?.(line.line),
        ...(options.onResult ? { onResult: (index, result) => results.live(index, result) } : {}),
      });
      results.end(execution.results);
      if (execution.cancelled && signal?.aborted) throw new CommandCancelledError(execResultOf(execution));
      return execution;
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
  }

  /**
   * A context of the code interpreter with its own state (and working directory): its kernel is
   * started now, so a missing interpreter is told here. Pass it to runCode as `context`.
   */
  async createCodeContext(contextOptions: CreateCodeContextOptions = {}): Promise<CodeContext> {
    const options = parseOptions(CreateCodeContextOptionsSchema, contextOptions, 'createCodeContext options');
    const context: CodeContext = {
      id: `ctx-${randomBytes(9).toString('base64url')}`,
      language: options.language ?? 'python',
      ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    };
    await this.runCode('', { context });
    return context;
  }

  /**
   * Writes to the stdin of a running command started with `openStdin` (by any client), in the
   * order written; a long write is cut into several messages.
   */
  writeStdin(commandId: string, data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    return this.transport.writeStdin(this.id, commandId, bytes);
  }

  /** Closes the stdin of a running command started with `openStdin`: it reads EOF. */
  closeStdin(commandId: string): Promise<void> {
    return this.transport.closeStdin(this.id, commandId);
  }

  /**
   * Cancels a running command of this sandbox, whoever started it: its whole process tree is
   * killed and its result says `cancelled`. A command already finished is left as it is.
   */
  cancel(commandId: string): Promise<void> {
    return this.transport.cancel(this.id, commandId, 'cancelled by a client');
  }

  /** The sandbox's record now (state, reason, activity). */
  async info(): Promise<SandboxRecord> {
    const sandbox = await this.transport.get(this.id);
    if (!sandbox) throw new SandboxNotFoundError(this.id);
    return sandbox;
  }

  /** The commands still in its bounded history, oldest first, with their results once they ended. */
  history(): Promise<CommandHistoryEntry[]> {
    return this.transport.history(this.id);
  }

  /**
   * Resource use and activity: CPU and memory of the sandbox's cgroup (null where the backend
   * does not give it one of its own to read), workspace size, and the commands it ran.
   */
  stats(): Promise<SandboxStats> {
    return this.transport.stats(this.id);
  }

  /**
   * Captures its files into a snapshot (docs/snapshots.md): on Docker every change it made
   * anywhere in its file system, deletions too; elsewhere its work tree. Its processes are frozen
   * meanwhile (`frozenMs`) and not captured. Over the tenant's snapshot quota: SandboxLimitError.
   */
  async snapshot(snapshotOptions: SnapshotOptions = {}): Promise<SnapshotInfo> {
    const options = parseOptions(SnapshotOptionsSchema, snapshotOptions, 'snapshot options');
    return this.transport.snapshot(this.id, options);
  }

  /**
   * Makes its files exactly the snapshot's: what was added since goes, what was removed comes
   * back, with modes, owners, symlinks and empty directories. Commands still running are killed
   * first (`stoppedCommands`). A damaged snapshot is refused (SnapshotCorruptError) before
   * anything changes.
   */
  restore(snapshotId: string): Promise<RestoreResult> {
    if (!SnapshotIdSchema.safeParse(snapshotId).success)
      return Promise.reject(new SnapshotNotFoundError(snapshotId));
    return this.transport.restore(this.id, snapshotId);
  }

  /** `count` (≤ 100) new sandboxes with this one's files, each diverging on its own. */
  async fork(forkOptions: ForkOptions): Promise<Sandbox[]> {
    const options = parseOptions(ForkOptionsSchema, forkOptions, 'fork options');
    const ids = await this.transport.fork(this.id, options.count, options.timeoutSeconds);
    return ids.map((id) => new Sandbox(id, this.transport));
  }

  /** Counts as a client call: the sandbox's idle expiry starts again. */
  keepAlive(): Promise<void> {
    return this.transport.keepAlive(this.id);
  }

  /**
   * It now ends `seconds` after this call (E2B's setTimeout: sooner or later than before), up to
   * the operator's maximum lifetime counted from when it became ready (`capped` says it was cut).
   * Only a ready sandbox has a lifetime to move; a resume starts it again from its spec.
   */
  async setTimeout(seconds: number): Promise<SandboxEndsAt> {
    const { timeoutSeconds } = parseOptions(
      SandboxSetTimeoutSchema,
      { timeoutSeconds: seconds },
      'setTimeout',
    );
    return this.transport.setTimeout(this.id, timeoutSeconds);
  }

  /**
   * Pauses the sandbox: everything written up to this call is kept (its files, as a snapshot
   * captures them), with its id, spec, labels and env; its slot, its sandbox (container, pod or
   * process) and everything running in it go. Commands still running are stopped and named in
   * the answer. Running processes are not kept: `{ memory: true }` is refused with the reason
   * (docs/live-sandboxes.md, "Pause"). Resolves once it is paused; `resume()` brings it back.
   */
  async pause(pauseOptions: SandboxPauseOptions = {}): Promise<PauseResult> {
    parseOptions(SandboxPauseOptionsSchema, pauseOptions, 'pause options');
    return this.transport.pause(this.id);
  }

  /**
   * Resumes a paused sandbox under the same id, its files as they were at the pause, and waits
   * until it takes commands (a fresh start: nothing that ran before is running).
   */
  resume(resumeOptions: CreateSandboxOptions = {}): Promise<SandboxRecord> {
    const options = parseOptions(CreateSandboxOptionsSchema, resumeOptions, 'resume options');
    return this.transport.resume(this.id, options);
  }

  /** Closes the sandbox (kills everything still running in it). Idempotent. */
  close(): Promise<SandboxRecord> {
    return this.transport.close(this.id);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** File operations on a sandbox's workspace: the agent's file steps, with their limits. */
export class SandboxFiles {
  constructor(
    private readonly sandboxId: string,
    private readonly transport: SandboxTransport,
  ) {}

  /**
   * Watches a directory (every one below it too with `recursive`): resolves once the watcher is
   * in place, then tells each change to onEvent until stop(), its timeout, or the sandbox closes.
   */
  watch(path: string, options: WatchOptions): Promise<DirectoryWatch> {
    return watchDirectory(this.sandboxId, this.transport, path, options);
  }

  /**
   * A file's content. `format: 'text'` (the default): UTF-8 text up to the read limit (binary or
   * larger: SandboxFileError). `'bytes'`: any file, as its exact bytes. `'stream'`: any file as a
   * Node Readable of its bytes, read as it comes (memory stays bounded on both sides). Bytes and
   * streams travel as a transfer does (download(): a tar stream of the one file), up to
   * `maxBytes` (default 1 GiB).
   */
  read(path: string, options?: ReadFileOptions & { format?: 'text' }): Promise<string>;
  read(path: string, options: ReadFileOptions & { format: 'bytes' }): Promise<Uint8Array>;
  read(path: string, options: ReadFileOptions & { format: 'stream' }): Promise<Readable>;
  async read(path: string, readOptions: ReadFileOptions = {}): Promise<string | Uint8Array | Readable> {
    const options = parseOptions(ReadFileOptionsSchema, readOptions, 'read options');
    if (options.format === 'text') return this.transport.readFile(this.sandboxId, path);
    const tar = this.transport.download(this.sandboxId, path, options.maxBytes);
    const content = fileOfTar(tar, path);
    if (options.format === 'stream') return content;
    const chunks: Buffer[] = [];
    for await (const chunk of content) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  /**
   * Writes a file; creates parent directories. Returns bytes written. `content`: text (UTF-8),
   * bytes (Uint8Array, Buffer), or a stream of bytes (a Node Readable or a web ReadableStream).
   * Text and bytes up to the write limit (10 MiB) are written atomically (temp file + rename);
   * a stream is first spooled to a local temporary file (memory stays bounded): up to the write
   * limit it is written the same way, beyond it travels as upload() does (a tar stream of the one
   * file, up to 1 GiB), written in place.
   */
  async write(path: string, content: FileContent, writeOptions: WriteFileOptions = {}): Promise<number> {
    const options = parseOptions(WriteFileOptionsSchema, writeOptions, 'write options');
    if (typeof content === 'string' || content instanceof Uint8Array)
      return this.transport.writeFile(this.sandboxId, path, content, options.mode);
    return writeStream(this.sandboxId, this.transport, path, content, options.mode);
  }

  list(
    path = '.',
    listOptions: ListFilesOptions = {},
  ): Promise<{ entries: FileEntry[]; truncated: boolean }> {
    const options = parseOptions(ListFilesOptionsSchema, listOptions, 'list options');
    return this.transport.listFiles(this.sandboxId, path, {
      maxDepth: options.maxDepth ?? 1,
      maxEntries: options.maxEntries ?? 1000,
    });
  }

  grep(
    pattern: string,
    grepOptions: GrepOptions = {},
  ): Promise<{ matches: GrepMatch[]; truncated: boolean }> {
    const options = parseOptions(GrepOptionsSchema, grepOptions, 'grep options');
    return this.transport.grep(this.sandboxId, pattern, options);
  }

  /**
   * Copies a local file or directory (or a tar stream) into the sandbox directory `remoteDir`
   * (created when missing), as `docker cp` does: a path arrives as `remoteDir/<its name>`. The
   * tree travels as a tar stream (over Redis in 1 MiB chunks, never as one value); past
   * `maxBytes` (default 1 GiB) it is refused.
   */
  async upload(
    local: string | Readable,
    remoteDir: string,
    transferOptions: TransferOptions = {},
  ): Promise<{ bytes: number; files: number }> {
    const options = parseOptions(TransferOptionsSchema, transferOptions, 'upload options');
    const tar = typeof local === 'string' ? await packTree(local) : local;
    return this.transport.upload(this.sandboxId, tar, remoteDir, options.maxBytes);
  }

  /**
   * A file or directory of the sandbox as a tar stream (its top entry named like it), read as it
   * comes: the agent waits while this side is slow, so memory stays bounded on both.
   */
  download(remotePath: string, transferOptions: TransferOptions = {}): Readable {
    const options = parseOptions(TransferOptionsSchema, transferOptions, 'download options');
    return this.transport.download(this.sandboxId, remotePath, options.maxBytes);
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
}

/** A command's stdin as the wire carries it: text as is, bytes in base64. */
function stdinFields(stdin: string | Uint8Array | undefined) {
  if (stdin === undefined) return {};
  if (typeof stdin === 'string') return { stdin };
  return { stdin: Buffer.from(stdin).toString('base64'), stdinEncoding: 'base64' as const };
}
