import { Limits, overLimit, SCHEMA_VERSION, type Step, type StepInput, StepSchema } from '@sandstream/wire';
import { z } from 'zod';
import { busLua } from './bus-lua.js';
import { JobField } from './job-layout.js';
import { JobStateSchema } from './job-state.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

const EXEC = busLua.load('sandbox-exec');
const TOUCH = busLua.load('sandbox-touch');

/** Commands a live sandbox keeps in its history (record and result); older ones are dropped. */
export const SANDBOX_HISTORY_LIMIT = 200;

/** Command ids are numbered per sandbox, so the history is ordered and trimmed by number. */
export function commandId(n: number): string {
  return `cmd-${n}`;
}

/** What the history keeps of a command beside its StepResult: what was asked, and when. */
export const CommandRecordSchema = z.object({
  id: z.string(),
  kind: z.enum(['run', 'readFile', 'writeFile', 'listFiles', 'grep']),
  /** run: the program, or the shell string with `shell`. */
  command: z.string().optional(),
  args: z.array(z.string()).optional(),
  shell: z.boolean().optional(),
  /** File operations: the path they name. */
  path: z.string().optional(),
  startedAt: z.number().int(),
});
export type CommandRecord = z.infer<typeof CommandRecordSchema>;

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A command as a client hands it over: a wire step's fields, without the ids the sandbox assigns. */
export type CommandStep = DistributiveOmit<
  Exclude<StepInput, { kind: 'shutdown' }>,
  'schemaVersion' | 'stepId' | 'parallel'
>;

export type PushCommandResult =
  | { status: 'pushed'; commandId: string; step: Step }
  | { status: 'missing' }
  | { status: 'not-sandbox' }
  | { status: 'not-ready'; state: z.infer<typeof JobStateSchema> }
  | { status: 'closing' };

export class CommandTooLargeError extends Error {
  override readonly name = 'CommandTooLargeError';
}

/**
 * The commands of live sandboxes: each is a wire step marked `parallel` (it runs beside the
 * others), pushed exactly once by one script that also checks the sandbox is ready and not
 * closing, records it in the bounded history and counts it as activity. The step-dispatcher
 * records each result when the agent's completion notice arrives (dispatch-advance).
 */
export class SandboxCommands {
  constructor(private readonly options: { redis: RedisClient; keys: KeySpace; now?: () => number }) {}

  async push(
    sandboxId: string,
    command: CommandStep,
    traceContext?: Step['traceContext'],
  ): Promise<PushCommandResult> {
    const { redis, keys } = this.options;
    const jobKey = keys.job(sandboxId);
    const n = await redis.hincrby(jobKey, JobField.commandSeq, 1);
    if (n === 1 && !(await redis.hexists(jobKey, JobField.state))) {
      // HINCRBY made a one-field hash of an unknown id: take it back.
      await redis.hdel(jobKey, JobField.commandSeq);
      return { status: 'missing' };
    }
    const id = commandId(n);
    const step = StepSchema.parse({
      ...command,
      schemaVersion: SCHEMA_VERSION,
      stepId: id,
      parallel: true,
      ...(traceContext ? { traceContext } : {}),
    });
    const stepJson = JSON.stringify(step);
    const bytes = Buffer.byteLength(stepJson, 'utf8');
    if (bytes > Limits.messageMaxBytes) {
      throw new CommandTooLargeError(overLimit('the command', bytes, Limits.messageMaxBytes, ' on the wire'));
    }
    const now = (this.options.now ?? Date.now)();
    const record: CommandRecord = {
      id,
      kind: step.kind as CommandRecord['kind'],
      startedAt: now,
      ...(step.kind === 'run'
        ? { command: step.command, args: step.args, ...(step.shell ? { shell: true } : {}) }
        : 'path' in step
          ? { path: step.path }
          : {}),
    };
    const dropped = n > SANDBOX_HISTORY_LIMIT ? commandId(n - SANDBOX_HISTORY_LIMIT) : '';
    const [status, state] = await EXEC.run<string[]>(
      redis,
      [jobKey, keys.sandbox(sandboxId).in],
      [id, stepJson, JSON.stringify(record), now, dropped],
    );
    switch (status) {
      case 'pushed':
        return { status: 'pushed', commandId: id, step };
      case 'not-ready':
        return { status: 'not-ready', state: JobStateSchema.parse(state) };
      case 'missing':
      case 'not-sandbox':
      case 'closing':
        return { status };
      default:
        // 'exists': the number was ours alone (HINCRBY), so only a record edited by hand gets here.
        throw new Error(`command ${id} of sandbox ${sandboxId} exists already`);
    }
  }

  /** A client call that is not a command (keepAlive): pushes the idle expiry out. False unless ready. */
  async touch(sandboxId: string): Promise<boolean> {
    const now = (this.options.now ?? Date.now)();
    return (await TOUCH.run<number>(this.options.redis, [this.options.keys.job(sandboxId)], [now])) === 1;
  }
}
