import {
  CommandSpecError,
  type CommandStep,
  CommandTooLargeError,
  decodeJobEventFields,
  JobField,
  type JobStore,
  type KeySpace,
  type PushCommandResult,
  pushCancel,
  type RedisClient,
  SANDBOX_MAX_RUNNING_COMMANDS,
  type SandboxCommands,
  sandboxRecordOf,
  stepResultField,
  TERMINAL_STATES,
} from '@sandstream/bus';
import {
  type CodeResult,
  type ControlMessage,
  decodeEventEntry,
  resultKey,
  type StepResult,
  StepResultSchema,
} from '@sandstream/wire';
import { SandstreamOptionsError } from './client-options.js';
import { CommandOutput, type CommandOutputLine, execItemOf, type OutputGap } from './command-output.js';
import { CodeResultPieces } from './live-code-results.js';
import type { ReaderPool } from './reader-pool.js';
import { SandboxClosedError, SandboxLimitError, SandboxNotFoundError } from './sandbox-errors.js';

/** How long one blocking read waits before the sandbox's state is looked at again. */
const BLOCK_MS = 1000;
/**
 * The agent writes a command's `completed` event and its result in one pipeline, the event
 * first: a follower may see the event a moment before the result. This bounds that moment.
 */
const RESULT_WAIT_MS = 10_000;

export interface CommandRunnerContext {
  redis: RedisClient;
  keys: KeySpace;
  store: JobStore;
  commands: SandboxCommands;
  readers: ReaderPool;
}

export interface RunCommandOptions {
  maxOutputBytes?: number | undefined;
  onLine?: ((line: CommandOutputLine) => void) | undefined;
  onGap?: ((gap: OutputGap) => void) | undefined;
  /** A code cell's result as the cell produced it (`index`: its place in the cell's results); best effort. */
  onResult?: ((index: number, result: CodeResult) => void) | undefined;
  /** Told the command's id once the sandbox took it (before any output). */
  onStart?: ((commandId: string) => void) | undefined;
  /** Aborting stops following (the transport rejects with its reason; Sandbox ends the follow quietly); the command goes on. */
  stopFollowing?: AbortSignal | undefined;
}

export interface CommandRun {
  commandId: string;
  result: StepResult;
  output: CommandOutput;
}

/**
 * Pushes one command into a ready sandbox and follows it on the sandbox's events stream until
 * its result: output lines (with gaps where the stream no longer held them), then the StepResult
 * the agent wrote (an abort is turned into a cancel by Sandbox, not here: the cancelled result
 * then arrives and is returned). A sandbox that ends meanwhile throws SandboxClosedError.
 */
export async function runCommand(
  ctx: CommandRunnerContext,
  sandboxId: string,
  command: CommandStep,
  options: RunCommandOptions = {},
): Promise<CommandRun> {
  // The reader is taken before the push when one is free: a fresh one then dials (and passes
  // its ready check) while the push's round trip runs, instead of after it. A CLI `exec` always
  // dials one, and that set-up was on its path to the first output (issue 33). When every reader
  // is busy the push does not wait for one: the command runs, and is followed once one is free.
  const reader = ctx.readers.tryAcquire();
  let pushed: Awaited<ReturnType<typeof pushCommand>>;
  try {
    pushed = await pushCommand(ctx, sandboxId, command);
    if (pushed.status !== 'pushed') throw await refusal(ctx, sandboxId, pushed);
  } catch (err) {
    if (reader) ctx.readers.release(reader);
    throw err;
  }
  options.onStart?.(pushed.commandId);
  return followCommand(ctx, sandboxId, pushed.commandId, pushed.lastEventId, options, reader);
}

/** ctx.commands.push with its refusals as the SDK's errors: too large, or a field the agent would refuse. */
export async function pushCommand(
  ctx: CommandRunnerContext,
  sandboxId: string,
  command: CommandStep,
): ReturnType<SandboxCommands['push']> {
  try {
    return await ctx.commands.push(sandboxId, command);
  } catch (err) {
    if (err instanceof CommandTooLargeError) throw new SandboxLimitError(err.message);
    if (err instanceof CommandSpecError) throw new SandstreamOptionsError(err.message);
    throw err;
  }
}

/**
 * Follows a command on the sandbox's events stream from `cursor` ('0-0': from the start of what
 * the stream still holds) to its result. Any client may follow any command of a sandbox.
 */
export async function followCommand(
  ctx: CommandRunnerContext,
  sandboxId: string,
  commandId: string,
  from: string,
  options: RunCommandOptions = {},
  /** A reader already taken from ctx.readers (runCommand's); released here either way. */
  taken?: RedisClient,
): Promise<CommandRun> {
  const sandboxKeys = ctx.keys.sandbox(sandboxId);
  let cursor = from;
  const output = new CommandOutput(options.maxOutputBytes);
  const reader = taken ?? (await ctx.readers.acquire());
  let broken = false;
  /**
   * The command's result, found while the stream showed nothing new. The agent writes a step's
   * events before its result, so once the result is there every event of it is in the stream:
   * what follows the cursor is read without blocking, then the command is over.
   */
  let found: StepResult | undefined;
  const results = options.onResult ? new CodeResultPieces(options.onResult) : undefined;
  try {
    for (;;) {
      options.stopFollowing?.throwIfAborted();
      let reply: [string, [string, string[]][]][] | null;
      try {
        const stream = sandboxKeys.events;
        reply = (
          found
            ? await reader.xread('COUNT', 500, 'STREAMS', stream, cursor)
            : await reader.xread('COUNT', 500, 'BLOCK', BLOCK_MS, 'STREAMS', stream, cursor)
        ) as typeof reply | null;
      } catch (err) {
        broken = true;
        throw err;
      }
      const entries = reply?.[0]?.[1] ?? [];
      let ended = false;
      for (const [id, fields] of entries) {
        cursor = id;
        // One event an entry, or several lines packed into one (decodeEventEntry).
        const events = decodeEventEntry(fields);
        for (const event of events) {
          if (event.stepId !== commandId) continue;
          const line = execItemOf(event.kind, event);
          if (line && line.stream !== 'gap') {
            const gap = output.add(line);
            if (gap) options.onGap?.(gap);
            options.onLine?.(line);
          } else if (event.kind === 'result') {
            if (event.codeResult) results?.add(event.codeResult);
          } else if (event.kind === 'completed') {
            output.complete(event.seq);
            // A command's plain result rides in its `completed` event; a file step's is fetched.
            const result = event.result ?? (await resultOf(ctx, sandboxId, commandId));
            return { commandId, output, result };
          }
        }
        if (events.length > 0) continue;
        const job = decodeJobEventFields(fields);
        if (job?.type === 'transition' && TERMINAL_STATES.includes(job.to)) ended = true;
      }
      if (found && entries.length === 0) {
        // Its `completed` was trimmed from the capped stream (a long-finished command attached to).
        output.complete(found.outputLines === undefined ? undefined : found.outputLines + 1);
        return { commandId, output, result: found };
      }
      if (ended || entries.length === 0) {
        // Nothing new: the command may have ended between the read and now (its events are then
        // read next, without blocking), its `completed` may have been trimmed, or the sandbox ended.
        found = await findResult(ctx, sandboxId, commandId);
        if (found) continue;
        const state = await ctx.redis.hget(ctx.keys.job(sandboxId), JobField.state);
        if (state === null) throw new SandboxNotFoundError(sandboxId);
        if (ended || TERMINAL_STATES.includes(state as (typeof TERMINAL_STATES)[number])) {
          throw await refusal(ctx, sandboxId, { status: 'closing' });
        }
      }
    }
  } finally {
    ctx.readers.release(reader, broken);
  }
}

async function resultOf(
  ctx: CommandRunnerContext,
  sandboxId: string,
  commandId: string,
): Promise<StepResult> {
  const deadline = Date.now() + RESULT_WAIT_MS;
  for (let pause = 2; ; pause = Math.min(pause * 2, 100)) {
    const found = await findResult(ctx, sandboxId, commandId);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`command ${commandId} completed but its result never arrived`);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

/**
 * The command's result, wherever it is at this moment: still on its own key (the agent's) or
 * already moved to the sandbox's record by the step-dispatcher. Both are read in one MULTI (same
 * slot), and the dispatcher moves it in one script, so it is never missed between them.
 */
export async function findResult(
  ctx: Pick<CommandRunnerContext, 'redis' | 'keys'>,
  sandboxId: string,
  commandId: string,
): Promise<StepResult | undefined> {
  const replies = await ctx.redis
    .multi()
    .hget(ctx.keys.job(sandboxId), stepResultField(commandId))
    .get(resultKey(ctx.keys.sandbox(sandboxId), commandId))
    .exec();
  for (const raw of [replies?.[0]?.[1], replies?.[1]?.[1]]) {
    if (typeof raw !== 'string') continue;
    const parsed = StepResultSchema.safeParse(safeJson(raw));
    if (parsed.success && parsed.data.stepId === commandId) return parsed.data;
  }
  return undefined;
}

/**
 * Asks a sandbox's agent to kill a command's whole tree (`signal` first, SIGKILL after its
 * grace); any client may, for any command. A command already finished is left as it is.
 */
export async function sendCancel(
  ctx: Pick<CommandRunnerContext, 'redis' | 'keys'>,
  sandboxId: string,
  commandId: string,
  reason: string,
  signal?: ControlMessage['signal'],
): Promise<void> {
  await pushCancel(ctx.redis, ctx.keys, sandboxId, {
    stepId: commandId,
    reason,
    ...(signal ? { signal } : {}),
  });
}

/**
 * The run step of a command given as an argv array (exec'd directly) or a string (through
 * `/bin/sh -c` unless `shell` says otherwise), for exec and processes.start alike.
 */
export function runStepOf(
  command: string | readonly string[],
  options: {
    shell?: boolean | undefined;
    cwd?: string | undefined;
    env?: Record<string, string> | undefined;
  },
  caller: string,
): Extract<CommandStep, { kind?: 'run' }> {
  const [program, ...args] = typeof command === 'string' ? [command] : [...command];
  if (!program) throw new TypeError(`${caller} needs a command`);
  return {
    kind: 'run',
    command: program,
    args,
    shell: options.shell ?? typeof command === 'string',
    workingDirectory: options.cwd ?? null,
    env: options.env ?? null,
  };
}

/** The typed error for a command the sandbox would not take. */
export async function refusal(
  ctx: Pick<CommandRunnerContext, 'store'>,
  sandboxId: string,
  refused: Exclude<PushCommandResult, { status: 'pushed' }>,
): Promise<Error> {
  if (refused.status === 'missing' || refused.status === 'not-sandbox')
    return new SandboxNotFoundError(sandboxId);
  if (refused.status === 'busy') {
    return new SandboxLimitError(
      `sandbox ${sandboxId} has ${refused.running} commands running or waiting, at most ${SANDBOX_MAX_RUNNING_COMMANDS}: wait for some to finish`,
    );
  }
  const record = await ctx.store.get(sandboxId);
  const sandbox = record ? sandboxRecordOf(record) : null;
  if (!sandbox) return new SandboxNotFoundError(sandboxId);
  return new SandboxClosedError(sandboxId, sandbox.state, sandbox.reason, sandbox.message);
}

function safeJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
