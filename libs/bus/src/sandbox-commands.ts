import {
  defaultCodeContext,
  formatIssue,
  Limits,
  overLimit,
  resultKey,
  SCHEMA_VERSION,
  STEP_KINDS,
  type Step,
  type StepInput,
  StepSchema,
} from '@sandstream/wire';
import { z } from 'zod';
import { busLua } from './bus-lua.js';
import { JobStateSchema } from './job-state.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

const EXEC = busLua.load('sandbox-exec');
const TOUCH = busLua.load('sandbox-touch');

/** Commands a live sandbox keeps in its history (record and result); older finished ones are dropped. */
export const SANDBOX_HISTORY_LIMIT = 200;

/**
 * Commands (not background processes) one live sandbox may have pushed and not finished: the
 * agent runs 16 at once and the rest wait in Redis, so this bounds what a client can queue.
 */
export const SANDBOX_MAX_RUNNING_COMMANDS = 64;

/** Command ids are numbered per sandbox, so the history is ordered and trimmed by number. */
export function commandId(n: number): string {
  return `cmd-${n}`;
}

/** What the history keeps of a command beside its StepResult: what was asked, and when. */
export const CommandRecordSchema = z.object({
  id: z.string(),
  kind: z.enum(STEP_KINDS).exclude(['shutdown']),
  /** shell: the session the command went to; code: the context the cell ran in. */
  session: z.string().optional(),
  /** run: the program, or the shell string with `shell`. */
  command: z.string().optional(),
  args: z.array(z.string()).optional(),
  shell: z.boolean().optional(),
  /** run: its stdin stays open for clients' writes (wire command-input.ts). */
  openStdin: z.boolean().optional(),
  /** A background process (processes.start) or a terminal: not counted as running for idleness. */
  background: z.boolean().optional(),
  /** terminal: its id (its input list and output stream). */
  terminal: z.string().optional(),
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
  | { status: 'pushed'; commandId: string; lastEventId: string; step: Step }
  | { status: 'missing' }
  | { status: 'not-sandbox' }
  | { status: 'not-ready'; state: z.infer<typeof JobStateSchema> }
  | { status: 'closing' }
  | { status: 'busy'; running: number };

/** Where the script writes the command's id: the first field of the step and of its record. */
const ID_SLOT = 'cmd-0';

/** Cuts JSON whose first field after `{` (or after schemaVersion) is `<key>"cmd-0"` around the id. */
function cutAroundId(json: string, key: string): [string, string] {
  const marker = `${key}"${ID_SLOT}"`;
  const at = json.indexOf(marker);
  // The id field comes before any caller-supplied value (schema order), so this is always it.
  if (at < 0 || at > 32) throw new Error(`internal: ${key} is not where the command id belongs`);
  const head = json.slice(0, at + key.length + 1);
  return [head, json.slice(head.length + ID_SLOT.length)];
}

export class CommandTooLargeError extends Error {
  override readonly name = 'CommandTooLargeError';
}

/**
 * A command the agent would refuse (a NUL byte in an argument, a path over its limit): refused
 * before it is pushed, each field of the step and its rule named (`args.1: an argument must not
 * contain a NUL byte (\0)`). The SDK turns it into its own bad-input error.
 */
export class CommandSpecError extends TypeError {
  override readonly name = 'CommandSpecError';
}

/**
 * The commands of live sandboxes: each is a wire step marked `parallel` (it runs beside the
 * others), pushed exactly once by one script that also checks the sandbox is ready and not
 * closing, records it in the bounded history and counts it as activity. The step-dispatcher
 * records each result when the agent's completion notice arrives (dispatch-advance).
 */
export class SandboxCommands {
  constructor(
    private readonly options: {
      redis: RedisClient;
      keys: KeySpace;
      now?: () => number;
      /** Only this tenant's sandboxes: another's is answered `missing`, checked in the push script. */
      tenant?: string;
    },
  ) {}

  /** The same commands, for one tenant's sandboxes only (an API caller's, say). */
  forTenant(tenant: string): SandboxCommands {
    return new SandboxCommands({ ...this.options, tenant });
  }

  /**
   * Pushes a command in one round trip (sandbox-exec). `lastEventId` is where the sandbox's events
   * stream ended before it: the command's events all come after it.
   */
  async push(
    sandboxId: string,
    command: CommandStep,
    traceContext?: Step['traceContext'],
  ): Promise<PushCommandResult> {
    const { redis, keys } = this.options;
    const parsed = StepSchema.safeParse({
      ...command,
      schemaVersion: SCHEMA_VERSION,
      stepId: ID_SLOT,
      parallel: true,
      ...(traceContext ? { traceContext } : {}),
    });
    if (!parsed.success) {
      throw new CommandSpecError(
        `invalid command: ${parsed.error.issues.map((i) => formatIssue(i)).join('; ')}`,
      );
    }
    const step = parsed.data;
    const stepJson = JSON.stringify(step);
    // Room for the longest id the script can give (cmd- and 15 digits).
    const bytes = Buffer.byteLength(stepJson, 'utf8') + 20;
    if (bytes > Limits.messageMaxBytes) {
      throw new CommandTooLargeError(overLimit('the command', bytes, Limits.messageMaxBytes, ' on the wire'));
    }
    const now = (this.options.now ?? Date.now)();
    const record: CommandRecord = {
      id: ID_SLOT,
      kind: step.kind as CommandRecord['kind'],
      startedAt: now,
      ...(step.kind === 'run'
        ? {
            command: step.command,
            args: step.args,
            ...(step.shell ? { shell: true } : {}),
            ...(step.background ? { background: true } : {}),
            ...(step.stdinStream ? { openStdin: true } : {}),
          }
        : step.kind === 'shell'
          ? { command: step.command, session: step.session }
          : step.kind === 'code'
            ? { session: step.context ?? defaultCodeContext(step.language) }
            : step.kind === 'terminal'
              ? {
                  terminal: step.terminal,
                  background: true,
                  ...(step.command ? { command: step.command[0], args: step.command.slice(1) } : {}),
                }
              : step.kind === 'watch'
                ? { path: step.path, background: true }
                : 'path' in step
                  ? { path: step.path }
                  : {}),
    };
    const [stepHead, stepTail] = cutAroundId(stepJson, '"stepId":');
    const [recordHead, recordTail] = cutAroundId(JSON.stringify(record), '"id":');
    const sandboxKeys = keys.sandbox(sandboxId);
    const [status, detail, lastEventId] = await EXEC.run<string[]>(
      redis,
      [keys.job(sandboxId), sandboxKeys.in, sandboxKeys.events],
      [
        stepHead,
        stepTail,
        recordHead,
        recordTail,
        SANDBOX_HISTORY_LIMIT,
        SANDBOX_MAX_RUNNING_COMMANDS,
        (step.kind === 'run' && step.background) || step.kind === 'terminal' || step.kind === 'watch'
          ? '1'
          : '0',
        this.options.tenant ?? '',
        resultKey(sandboxKeys, ''),
      ],
    );
    switch (status) {
      case 'pushed':
        return {
          status: 'pushed',
          commandId: String(detail),
          lastEventId: String(lastEventId),
          step: { ...step, stepId: String(detail) },
        };
      case 'not-ready':
        return { status: 'not-ready', state: JobStateSchema.parse(detail) };
      case 'busy':
        return { status: 'busy', running: Number(detail) };
      default:
        return { status: status as 'missing' | 'not-sandbox' | 'closing' };
    }
  }

  /** A client call that is not a command (keepAlive): pushes the idle expiry out. False unless ready. */
  async touch(sandboxId: string): Promise<boolean> {
    return (await TOUCH.run<number>(this.options.redis, [this.options.keys.job(sandboxId)], [])) === 1;
  }
}
