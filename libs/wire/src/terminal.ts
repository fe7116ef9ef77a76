import { Limits } from './limits.js';

/**
 * What travels on a terminal's keys (wire terminalKeys).
 *
 * Input (LIST, client → agent), one Redis value per message, binary:
 *   `d` + bytes          what was typed or pasted (a Ctrl-C is 0x03: the terminal's line
 *                        discipline turns it into SIGINT for the foreground command)
 *   `r` + "cols,rows"    the window was resized
 *
 * Output (STREAM, agent → client), one entry per chunk the program wrote:
 *   `d` → bytes          output, exactly as the program wrote it (escape sequences and all)
 *   `x` → exit code      the end: the program exited ("" when it ended without one: killed)
 */
export type TerminalInput = { kind: 'data'; data: Buffer } | { kind: 'resize'; cols: number; rows: number };

export interface TerminalSizeInput {
  cols: number;
  rows: number;
}

/** Output stream field names. */
export const TerminalOutputField = { data: 'd', exit: 'x' } as const;

/** Throws a RangeError naming the field and its limit for a size no terminal can have. */
export function checkTerminalSize(size: TerminalSizeInput): void {
  const check = (name: 'cols' | 'rows', max: number) => {
    const value = size[name];
    if (!Number.isInteger(value) || value < 1 || value > max) {
      throw new RangeError(`${name} must be an integer from 1 to ${max} (got ${value})`);
    }
  };
  check('cols', Limits.terminalMaxCols);
  check('rows', Limits.terminalMaxRows);
}

/** One input message per call; data longer than terminalInputMaxBytes is cut into several. */
export function encodeTerminalInput(input: TerminalInput): Buffer[] {
  if (input.kind === 'resize') {
    checkTerminalSize(input);
    return [Buffer.from(`r${input.cols},${input.rows}`, 'latin1')];
  }
  const messages: Buffer[] = [];
  for (let at = 0; at < input.data.length; at += Limits.terminalInputMaxBytes) {
    const piece = input.data.subarray(at, at + Limits.terminalInputMaxBytes);
    messages.push(Buffer.concat([Buffer.from('d'), piece]));
  }
  return messages;
}

/** The message, or null for one no client of this version writes (it is skipped, not fatal). */
export function decodeTerminalInput(message: Buffer): TerminalInput | null {
  const tag = message[0];
  if (tag === 0x64 /* d */) return { kind: 'data', data: message.subarray(1) };
  if (tag === 0x72 /* r */) {
    const match = /^(\d{1,4}),(\d{1,4})$/.exec(message.subarray(1).toString('latin1'));
    if (!match) return null;
    const size = { cols: Number(match[1]), rows: Number(match[2]) };
    try {
      checkTerminalSize(size);
    } catch {
      return null;
    }
    return { kind: 'resize', ...size };
  }
  return null;
}
