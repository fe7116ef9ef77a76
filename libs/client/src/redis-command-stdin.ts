import { type CommandInput, commandInputKey, encodeCommandInput, Limits } from '@sandstream/wire';
import { findResult, refusal } from './command-runner.js';
import type { RedisSandboxContext } from './redis-sandbox-context.js';
import {
  SandboxCommandNotFoundError,
  SandboxConflictError,
  SandboxLimitError,
  SandboxNotFoundError,
} from './sandbox-errors.js';

/**
 * Input for a running command's open stdin over Redis: checked against the sandbox's record (the
 * command exists, still runs, was started with openStdin), then pushed to its input list, which
 * the agent pops while the command runs (wire command-input.ts). Writing counts as activity.
 */
export async function sendCommandInput(
  ctx: RedisSandboxContext,
  sandboxId: string,
  commandId: string,
  input: CommandInput,
): Promise<void> {
  const record = await ctx.store.get(sandboxId);
  // Another tenant's sandbox is a missing one, as for every call (the API's routes check first).
  if (record?.kind !== 'sandbox' || (ctx.tenant !== undefined && record.tenant !== ctx.tenant))
    throw new SandboxNotFoundError(sandboxId);
  const command = record.commands[commandId] as { openStdin?: unknown } | undefined;
  if (command === undefined) throw new SandboxCommandNotFoundError(sandboxId, commandId);
  // Ended: its result moved to the record, or still on the agent's own key, where it lands with
  // the `completed` event a follower already saw (the dispatcher moves it a moment later).
  if (commandId in record.stepResults || (await findResult(ctx, sandboxId, commandId)))
    throw new SandboxCommandNotFoundError(
      sandboxId,
      commandId,
      `command ${commandId} has ended: its stdin is closed`,
    );
  if (command.openStdin !== true)
    throw new SandboxConflictError(
      `command ${commandId} was not started with openStdin: its stdin is not open`,
    );
  const key = commandInputKey(ctx.keys.sandbox(sandboxId), commandId);
  const waiting = await ctx.redis.llen(key);
  if (waiting >= Limits.stdinMaxPending) {
    throw new SandboxLimitError(
      `command ${commandId} has ${waiting} stdin messages waiting, at most ${Limits.stdinMaxPending}: it reads no input`,
    );
  }
  const messages = encodeCommandInput(input);
  if (messages.length === 0) return;
  // Input nobody reads (the command ended between the check and the push) expires with it.
  await ctx.redis
    .multi()
    .lpush(key, ...messages)
    .expire(key, Limits.runMaxTimeoutSeconds)
    .exec();
  if (!(await ctx.commands.touch(sandboxId))) throw await refusal(ctx, sandboxId, { status: 'closing' });
}
