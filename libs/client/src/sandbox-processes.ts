import { type ControlMessage, Limits } from '@sandstream/wire';
import { parseOptions } from './client-options.js';
import type { CommandExecution } from './command-execution.js';
import { runStepOf } from './command-runner.js';
import type { CommandHistoryEntry } from './sandbox-history.js';
import {
  type AttachOptions,
  type StartProcessOptions,
  StartProcessOptionsSchema,
} from './sandbox-options.js';
import type { SandboxTransport } from './transport.js';

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
    private readonly transport: SandboxTransport,
    private readonly attach: (id: string, options?: AttachOptions) => CommandExecution,
    private readonly history: () => Promise<CommandHistoryEntry[]>,
  ) {}

  /** Starts it and answers at once with its handle (its output and end come through follow()). */
  async start(
    command: string | readonly string[],
    startOptions: StartProcessOptions = {},
  ): Promise<BackgroundProcess> {
    const options = parseOptions(StartProcessOptionsSchema, startOptions, 'process options');
    const id = await this.transport.startProcess(this.sandboxId, {
      ...runStepOf(command, options, 'processes.start'),
      background: true,
      timeoutSeconds: options.timeoutSeconds ?? Limits.runMaxTimeoutSeconds,
    });
    return new BackgroundProcess(id, this);
  }

  /** The background processes still running (of those in the sandbox's history). */
  async list(): Promise<CommandHistoryEntry[]> {
    return (await this.history()).filter((c) => c.background === true && c.result === undefined);
  }

  /** Kills the process's whole tree: `signal` first (default SIGTERM), SIGKILL after a grace. */
  kill(id: string, signal?: ProcessSignal): Promise<void> {
    return this.transport.cancel(this.sandboxId, id, 'killed by a client', signal);
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
