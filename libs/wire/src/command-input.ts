import type { SandboxKeys } from './key-names.js';
import { Limits } from './limits.js';

/**
 * The stdin of a run step started with `stdinStream` (E2B's `stdin: true`): a LIST under the
 * sandbox's prefix, named by the command's id, that clients LPUSH to and the agent pops from
 * the other end (FIFO) while the command runs. One Redis value per message, binary:
 *
 *   `d` + bytes   what to write to the command's stdin, in order
 *   `e`           close its stdin (the command reads EOF); later messages are dropped
 */
export type CommandInput = { kind: 'data'; data: Buffer } | { kind: 'end' };

/** The input list of a command (its id is the step's). */
export function commandInputKey(keys: SandboxKeys, commandId: string): string {
  return `${keys.prefix}stdin:${commandId}`;
}

/** The messages for one input: data longer than stdinMessageMaxBytes is cut into several. */
export function encodeCommandInput(input: CommandInput): Buffer[] {
  if (input.kind === 'end') return [Buffer.from('e')];
  const messages: Buffer[] = [];
  for (let at = 0; at < input.data.length; at += Limits.stdinMessageMaxBytes) {
    messages.push(
      Buffer.concat([Buffer.from('d'), input.data.subarray(at, at + Limits.stdinMessageMaxBytes)]),
    );
  }
  return messages;
}

/** The message, or null for one no client of this version writes (skipped, not fatal). */
export function decodeCommandInput(message: Buffer): CommandInput | null {
  if (message[0] === 0x64 /* d */) return { kind: 'data', data: message.subarray(1) };
  if (message[0] === 0x65 /* e */ && message.length === 1) return { kind: 'end' };
  return null;
}
