import { Duplex } from 'node:stream';
import { parseOptions } from './client-options.js';
import type { ExecResult } from './command-output.js';
import { type TerminalOptions, TerminalOptionsSchema } from './sandbox-options.js';
import type { SandboxTransport, TerminalChannel, TerminalOutputOptions } from './transport.js';

export type { TerminalOutputOptions } from './transport.js';

/**
 * An interactive program on a pseudo-terminal in the sandbox (by default its shell): bytes in
 * (keystrokes; a Ctrl-C is '\x03'), bytes out (escape sequences and all), a window size. Any
 * client that knows the sandbox may attach to it by its command id and type into it as well.
 * It ends when the program exits, on kill(), or when the sandbox closes.
 */
export class Terminal implements AsyncIterable<Buffer> {
  /** The command id, as in the sandbox's history (what attach takes). */
  readonly id: string;
  /** The id its Redis keys are named by. */
  readonly terminalId: string;

  constructor(
    readonly sandboxId: string,
    private readonly channel: TerminalChannel,
  ) {
    this.id = channel.id;
    this.terminalId = channel.terminalId;
  }

  /** Sends input as typed; a long paste is cut into several messages, in order. */
  async write(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data);
    if (bytes.length > 0) await this.channel.write(bytes);
  }

  /** The window's new size; the program gets SIGWINCH. */
  async resize(cols: number, rows: number): Promise<void> {
    await this.channel.resize(cols, rows);
  }

  /** Hangs it up: SIGHUP to every process of the terminal's session, SIGKILL to what is left. */
  kill(): Promise<void> {
    return this.channel.kill();
  }

  /**
   * Its end as an ExecResult (E2B's handles resolve to a result object too): `exitCode` is the
   * program's code (128 + N for signal N), `cancelled` when it was hung up. Its output is what
   * output() yields, not `stdout`.
   */
  async wait(): Promise<ExecResult> {
    return this.channel.wait();
  }

  /** Its output as it was written, until the program ended (or the sandbox did). */
  output(options: TerminalOutputOptions = {}): AsyncGenerator<Buffer> {
    return this.channel.output(options);
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
}

/** The sandbox's terminals: open one, or attach to one another client opened. */
export class SandboxTerminals {
  constructor(
    private readonly sandboxId: string,
    private readonly transport: SandboxTransport,
  ) {}

  /** Starts the program on a new terminal (default: the image's shell on 80x24) and answers with its handle. */
  async open(terminalOptions: TerminalOptions = {}): Promise<Terminal> {
    const options = parseOptions(TerminalOptionsSchema, terminalOptions, 'terminal options');
    return new Terminal(this.sandboxId, await this.transport.openTerminal(this.sandboxId, options));
  }

  /** A terminal of this sandbox by its command id (another client's, or this one's before a restart). */
  async attach(commandId: string): Promise<Terminal> {
    return new Terminal(this.sandboxId, await this.transport.attachTerminal(this.sandboxId, commandId));
  }
}
