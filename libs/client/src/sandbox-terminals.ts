import { randomBytes } from 'node:crypto';
import { Duplex } from 'node:stream';
import { TERMINAL_STATES } from '@sandstream/bus';
import {
  encodeTerminalInput,
  Limits,
  type TerminalInput,
  TerminalOutputField,
  terminalKeys,
} from '@sandstream/wire';
import { parseOptions } from './client-options.js';
import type { ExecResult } from './command-output.js';
import { followCommand, refusal, sendCancel } from './command-runner.js';
import type { SandboxContext } from './sandbox.js';
import { SandboxCommandNotFoundError, SandboxLimitError, SandboxNotFoundError } from './sandbox-errors.js';
import { type TerminalOptions, TerminalOptionsSchema } from './sandbox-options.js';

/** How long one blocking read of the output waits before the terminal's end is looked for elsewhere. */
const BLOCK_MS = 1000;
/** Typing counts as activity for the sandbox's idle expiry; told to Redis at most this often. */
const TOUCH_EVERY_MS = 5000;

type Context = SandboxContext;

export interface TerminalOutputOptions {
  /** `start`: what the output stream still holds (its last ~2,000 chunks), then live. `now`: only what comes next. */
  from?: 'start' | 'now';
  signal?: AbortSignal;
}

/**
 * An interactive program on a pseudo-terminal in the sandbox (by default its shell): bytes in
 * (keystrokes; a Ctrl-C is '\x03'), bytes out (escape sequences and all), a window size. Any
 * client that knows the sandbox may attach to it by its command id and type into it as well.
 * It ends when the program exits, on kill(), or when the sandbox closes.
 */
export class Terminal implements AsyncIterable<Buffer> {
  private lastTouch = 0;

  constructor(
    readonly sandboxId: string,
    /** The command id, as in the sandbox's history (what attach takes). */
    readonly id: string,
    /** The id its Redis keys are named by. */
    readonly terminalId: string,
    private readonly ctx: Context,
  ) {}

  /** Sends input as typed; a long paste is cut into several messages, in order. */
  async write(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    if (bytes.length > 0) await this.send({ kind: 'data', data: bytes });
  }

  /** The window's new size; the program gets SIGWINCH. */
  async resize(cols: number, rows: number): Promise<void> {
    await this.send({ kind: 'resize', cols, rows });
  }

  /** Hangs it up: SIGHUP to every process of the terminal's session, SIGKILL to what is left. */
  kill(): Promise<void> {
    return sendCancel(this.ctx, this.sandboxId, this.id, 'terminal hung up by a client', 'SIGHUP');
  }

  /** Its end: the program's exit code (128 + N for signal N), or how it was hung up. */
  async wait(): Promise<ExecResult> {
    const run = await followCommand(this.ctx, this.sandboxId, this.id, '$');
    return run.output.result(run.commandId, run.result);
  }

  /** Its output as it was written, until the program ended (or the sandbox did). */
  async *output(options: TerminalOutputOptions = {}): AsyncGenerator<Buffer> {
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

  [Symbol.asyncIterator](): AsyncIterator<Buffer> {
    return this.output();
  }

  /**
   * The terminal as a Node stream: write keystrokes into it, read its output from it (from the
   * start of what the stream holds, or `now`). `process.stdin.pipe(t.stream()).pipe(process.stdout)`.
   */
  stream(options: Omit<TerminalOutputOptions, 'signal'> = {}): Duplex {
    const stop = new AbortController();
    let wanted: (() => void) | undefined;
    let started = false;
    const pump = async (duplex: Duplex) => {
      try {
        for await (const chunk of this.output({ ...options, signal: stop.signal })) {
          // Backpressure: a reader that takes nothing stops the reads from Redis.
          if (!duplex.push(chunk)) await new Promise<void>((resolve) => (wanted = resolve));
        }
        duplex.push(null);
      } catch (err) {
        duplex.destroy(err as Error);
      }
    };
    return new Duplex({
      read() {
        if (!started) {
          started = true;
          void pump(this);
        }
        wanted?.();
        wanted = undefined;
      },
      write: (chunk: Buffer, _encoding, done) => {
        this.write(chunk).then(() => done(), done);
      },
      destroy: (err, done) => {
        stop.abort();
        wanted?.();
        done(err);
      },
    });
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

/** The sandbox's terminals: open one, or attach to one another client opened. */
export class SandboxTerminals {
  constructor(
    private readonly sandboxId: string,
    private readonly ctx: Context,
  ) {}

  /** Starts the program on a new terminal (default: the image's shell on 80x24) and answers with its handle. */
  async open(terminalOptions: TerminalOptions = {}): Promise<Terminal> {
    const options = parseOptions(TerminalOptionsSchema, terminalOptions, 'terminal options');
    const terminalId = randomBytes(12).toString('base64url');
    const pushed = await this.ctx.commands.push(this.sandboxId, {
      kind: 'terminal',
      terminal: terminalId,
      ...(options.command ? { command: options.command } : {}),
      ...(options.cols !== undefined ? { cols: options.cols } : {}),
      ...(options.rows !== undefined ? { rows: options.rows } : {}),
      env: options.env ?? null,
      workingDirectory: options.cwd ?? null,
      ...(options.timeoutSeconds !== undefined ? { timeoutSeconds: options.timeoutSeconds } : {}),
    });
    if (pushed.status !== 'pushed') throw await refusal(this.ctx, this.sandboxId, pushed);
    return new Terminal(this.sandboxId, pushed.commandId, terminalId, this.ctx);
  }

  /** A terminal of this sandbox by its command id (another client's, or this one's before a restart). */
  async attach(commandId: string): Promise<Terminal> {
    const record = await this.ctx.store.get(this.sandboxId);
    if (record?.kind !== 'sandbox') throw new SandboxNotFoundError(this.sandboxId);
    const raw = record.commands[commandId] as { kind?: unknown; terminal?: unknown } | undefined;
    if (raw?.kind !== 'terminal' || typeof raw.terminal !== 'string') {
      throw new SandboxCommandNotFoundError(this.sandboxId, commandId);
    }
    return new Terminal(this.sandboxId, commandId, raw.terminal, this.ctx);
  }
}
