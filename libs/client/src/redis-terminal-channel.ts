import { TERMINAL_STATES } from '@sandstream/bus';
import {
  encodeTerminalInput,
  Limits,
  type TerminalInput,
  TerminalOutputField,
  terminalKeys,
} from '@sandstream/wire';
import type { ExecResult } from './command-output.js';
import { followCommand, refusal, sendCancel } from './command-runner.js';
import type { RedisSandboxContext } from './redis-sandbox-context.js';
import { SandboxLimitError, SandboxNotFoundError } from './sandbox-errors.js';
import type { TerminalChannel, TerminalOutputOptions } from './transport.js';

/** How long one blocking read of the output waits before the terminal's end is looked for elsewhere. */
const BLOCK_MS = 1000;
/** Typing counts as activity for the sandbox's idle expiry; told to Redis at most this often. */
const TOUCH_EVERY_MS = 5000;

/**
 * A terminal over Redis: input messages pushed to its input list, output read from its output
 * stream, its end from the sandbox's events stream.
 */
export class RedisTerminalChannel implements TerminalChannel {
  private lastTouch = 0;

  constructor(
    readonly sandboxId: string,
    readonly id: string,
    readonly terminalId: string,
    private readonly ctx: RedisSandboxContext,
  ) {}

  async write(data: Buffer): Promise<void> {
    await this.send({ kind: 'data', data });
  }

  async resize(cols: number, rows: number): Promise<void> {
    await this.send({ kind: 'resize', cols, rows });
  }

  kill(): Promise<void> {
    return sendCancel(this.ctx, this.sandboxId, this.id, 'terminal hung up by a client', 'SIGHUP');
  }

  async wait(): Promise<ExecResult> {
    const run = await followCommand(this.ctx, this.sandboxId, this.id, '$');
    return run.output.result(run.commandId, run.result);
  }

  /** Its output as it was written, until the program ended (or the sandbox did). */
  async *output(options: TerminalOutputOptions): AsyncGenerator<Buffer> {
    const key = terminalKeys(this.ctx.keys.sandbox(this.sandboxId), this.terminalId).output;
    let cursor = options.from === 'now' ? '$' : '0-0';
    if (cursor === '$') {
      // '$' is resolved once: later reads continue from the last entry seen, never skip one.
      const last = (await this.ctx.redis.xrevrange(key, '+', '-', 'COUNT', 1))[0];
      cursor = last?.[0] ?? '0-0';
    }
    const reader = await this.ctx.readers.acquire();
    let broken = false;
    const abort = () => {
      broken = true;
      reader.disconnect();
    };
    options.signal?.addEventListener('abort', abort, { once: true });
    try {
      for (;;) {
        if (options.signal?.aborted) return;
        let reply: [Buffer, [Buffer, Buffer[]][]][] | null;
        try {
          reply = (await reader.xreadBuffer('COUNT', 100, 'BLOCK', BLOCK_MS, 'STREAMS', key, cursor)) as
            | [Buffer, [Buffer, Buffer[]][]][]
            | null;
        } catch (err) {
          broken = true;
          if (options.signal?.aborted) return;
          throw err;
        }
        const entries = reply?.[0]?.[1] ?? [];
        for (const [id, fields] of entries) {
          cursor = id.toString('latin1');
          for (let i = 0; i + 1 < fields.length; i += 2) {
            const name = fields[i]?.toString('latin1');
            if (name === TerminalOutputField.exit) return;
            if (name === TerminalOutputField.data) yield fields[i + 1] as Buffer;
          }
        }
        // Nothing new: a terminal that never started (or whose agent died) writes no end entry.
        if (entries.length === 0 && (await this.over())) return;
      }
    } finally {
      options.signal?.removeEventListener('abort', abort);
      this.ctx.readers.release(reader, broken);
    }
  }

  private async send(input: TerminalInput): Promise<void> {
    let messages: Buffer[];
    try {
      messages = encodeTerminalInput(input);
    } catch (err) {
      throw new SandboxLimitError((err as Error).message);
    }
    const key = terminalKeys(this.ctx.keys.sandbox(this.sandboxId), this.terminalId).input;
    const waiting = await this.ctx.redis.llen(key);
    if (waiting >= Limits.terminalInputMaxPending) {
      throw new SandboxLimitError(
        `terminal ${this.id} has ${waiting} input messages waiting, at most ${Limits.terminalInputMaxPending}: it reads no input (is it still running?)`,
      );
    }
    // A terminal nobody ends must not leave its input behind: the list expires with it.
    await this.ctx.redis
      .multi()
      .lpush(key, ...messages)
      .expire(key, Limits.runMaxTimeoutSeconds)
      .exec();
    if (Date.now() - this.lastTouch > TOUCH_EVERY_MS) {
      this.lastTouch = Date.now();
      if (!(await this.ctx.commands.touch(this.sandboxId))) {
        throw await refusal(this.ctx, this.sandboxId, { status: 'closing' });
      }
    }
  }

  /** Whether it ended without an end entry: its result is recorded, or the sandbox is over. */
  private async over(): Promise<boolean> {
    const record = await this.ctx.store.get(this.sandboxId);
    if (!record) throw new SandboxNotFoundError(this.sandboxId);
    return this.id in record.stepResults || TERMINAL_STATES.includes(record.state);
  }
}
