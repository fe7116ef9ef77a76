import { mkdir } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import {
  type SandboxPauseOptions,
  SandboxPauseOptionsSchema,
  type SandboxRecord,
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
import { parseOptions } from './client-options.js';
import { CommandExecution } from './command-execution.js';
import type { ExecResult } from './command-output.js';
import { type RunCommandOptions, runStepOf } from './command-runner.js';
import {
  CommandCancelledError,
  SandboxLimitError,
  SandboxNotFoundError,
  SnapshotNotFoundError,
} from './sandbox-errors.js';
import type { CommandHistoryEntry, SandboxStats } from './sandbox-history.js';
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
import {
  type ForkOptions,
  ForkOptionsSchema,
  type RestoreResult,
  type SnapshotInfo,
  type SnapshotOptions,
  SnapshotOptionsSchema,
} from './snapshots.js';
import type { RunStep, SandboxTransport } from './transport.js';

export { CommandExecution } from './command-execution.js';
export type { ExecItem } from './command-output.js';
export type { CommandHistoryEntry, SandboxStats } from './sandbox-history.js';

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
    };
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
      try {
        const result = await start({
          maxOutputBytes: options.maxOutputBytes,
          stopFollowing: 'stopFollowing' in options ? options.stopFollowing : undefined,
          onStart: (started) => {
            commandId = started;
            options.onStart?.(started);
            if (signal?.aborted) cancel();
          },
          onLine: (line) => {
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

  /** A UTF-8 text file's content (binary or over the read limit: SandboxFileError). */
  read(path: string): Promise<string> {
    return this.transport.readFile(this.sandboxId, path);
  }

  /** Writes atomically (temp file + rename); creates parent directories. Returns bytes written. */
  write(path: string, content: string | Uint8Array, writeOptions: WriteFileOptions = {}): Promise<number> {
    const options = parseOptions(WriteFileOptionsSchema, writeOptions, 'write options');
    return this.transport.writeFile(this.sandboxId, path, content, options.mode);
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
