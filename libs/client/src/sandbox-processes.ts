import type { SandboxCommands } from '@sandstream/bus';
import { type ControlMessage, encodeCancel, Limits, strictObject } from '@sandstream/wire';
import { z } from 'zod';
import { parseOptions } from './client-options.js';
import { refusal } from './command-runner.js';
import type { CommandExecution, CommandHistoryEntry, SandboxContext } from './sandbox.js';
import type { AttachOptions } from './sandbox-options.js';

export const StartProcessOptionsSchema = strictObject({
  /** Run the command string through `/bin/sh -c` (a string command implies it). */
  shell: z.boolean().optional(),
  cwd: z.string().min(1).max(4096).optional(),
  env: z.record(z.string(), z.string()).optional(),
  /** Killed after this long (default and at most 24 h); closing the sandbox kills it anyway. */
  timeoutSeconds: z.number().positive().max(Limits.runMaxTimeoutSeconds).optional(),
});
export type StartProcessOptions = z.input<typeof StartProcessOptionsSchema>;

export type ProcessSignal = NonNullable<ControlMessage['signal']>;

/** A background process of a live sandbox, by id: follow its output, kill its tree. */
export class BackgroundProcess {
  constructor(
    readonly id: string,
    private readonly processes: SandboxProcesses,
  ) {}

  follow(options?: AttachOptions): CommandExecution {
    return this.processes.follow(this.id, options);
  }

  kill(signal?: ProcessSignal): Promise<void> {
    return this.processes.kill(this.id, signal);
  }
}

/**
 * Background processes of a live sandbox (a dev server, a watcher): started without waiting,
 * they run beside the sandbox's commands until they exit, are killed, or the sandbox closes
 * (which kills every one of their trees). They do not keep the sandbox from going idle. Any
 * client that knows the sandbox lists, follows and kills them by id.
 */
export class SandboxProcesses {
  constructor(
    private readonly sandboxId: string,
    private readonly ctx: SandboxContext & { commands: SandboxCommands },
    private readonly attach: (id: string, options?: AttachOptions) => CommandExecution,
    private readonly history: () => Promise<CommandHistoryEntry[]>,
  ) {}

  /** Starts it and answers at once with its handle (its output and end come through follow()). */
  async start(
    command: string | readonly string[],
    startOptions: StartProcessOptions = {},
  ): Promise<BackgroundProcess> {
    const options = parseOptions(StartProcessOptionsSchema, startOptions, 'process options');
    const argv = typeof command === 'string' ? [command] : [...command];
    const [program, ...args] = argv;
    if (!program) throw new TypeError('processes.start needs a command');
    const pushed = await this.ctx.commands.push(this.sandboxId, {
      kind: 'run',
      command: program,
      args,
      shell: options.shell ?? typeof command === 'string',
      background: true,
      workingDirectory: options.cwd ?? null,
      env: options.env ?? null,
      timeoutSeconds: options.timeoutSeconds ?? Limits.runMaxTimeoutSeconds,
    });
    if (pushed.status !== 'pushed') throw await refusal(this.ctx, this.sandboxId, pushed);
    return new BackgroundProcess(pushed.commandId, this);
  }

  /** The background processes still running (of those in the sandbox's history). */
  async list(): Promise<CommandHistoryEntry[]> {
    return (await this.history()).filter((c) => c.background === true && c.result === undefined);
  }

  /** Kills the process's whole tree: `signal` first (default SIGTERM), SIGKILL after a grace. */
  async kill(id: string, signal?: ProcessSignal): Promise<void> {
    await this.ctx.redis.lpush(
      this.ctx.keys.sandbox(this.sandboxId).control,
      encodeCancel(id, 'killed by a client', signal),
    );
  }

  /** Its output from the start of what the stream holds, then live, then its end. */
  follow(id: string, options?: AttachOptions): CommandExecution {
    return this.attach(id, options);
  }

  /** A handle on a process by id (after a client restart, say). */
  get(id: string): BackgroundProcess {
    return new BackgroundProcess(id, this);
  }
}
