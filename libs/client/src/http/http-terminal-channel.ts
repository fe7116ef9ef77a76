import { encodeTerminalInput, type TerminalInput } from '@sandstream/wire';
import type { WebSocket } from 'ws';
import type { ExecResult } from '../command-output.js';
import type { RunCommandOptions } from '../command-runner.js';
import { SandboxLimitError } from '../sandbox-errors.js';
import type { TerminalChannel, TerminalOutputOptions } from '../transport.js';
import type { HttpApi, Query } from './http-api.js';
import { errorOfProblem, ProblemBodySchema } from './problem-errors.js';

/** What the API's shell endpoint sends as text frames (binary frames are the terminal's output). */
type ShellMessage =
  | { type: 'started'; terminalId: string }
  | { type: 'exit'; exitCode: number | null }
  | { type: 'error'; problem: unknown };

/**
 * A terminal over the API's WebSocket shell (GET /v1/sandboxes/{id}/shell): output arrives as
 * binary frames and is queued until read; keystrokes go as binary frames, a resize as a JSON
 * text frame. The socket is the terminal's one reader: output() hands out what arrived since
 * the socket opened (`start`) or from the call on (`now`). Closing the socket hangs an unnamed
 * shell up, which is what kill() does after asking for SIGHUP.
 */
export class HttpTerminalChannel implements TerminalChannel {
  private readonly chunks: Buffer[] = [];
  private wake: (() => void) | undefined;
  private ended = false;
  private failure: Error | undefined;
  private readonly ends: (() => void)[] = [];

  private constructor(
    readonly sandboxId: string,
    readonly id: string,
    private readonly socket: WebSocket,
    private readonly api: HttpApi,
    private readonly follow: (commandId: string, options: RunCommandOptions) => Promise<ExecResult>,
  ) {
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) this.chunks.push(data);
      else this.onText(data.toString('utf8'));
      this.wake?.();
    });
    socket.on('close', () => this.end());
    socket.on('error', (err) => this.end(err));
  }

  get terminalId(): string {
    return this.id;
  }

  /** Opens the socket and resolves once the API says the terminal started. */
  static async open(
    api: HttpApi,
    sandboxId: string,
    query: Query,
    follow: (commandId: string, options: RunCommandOptions) => Promise<ExecResult>,
  ): Promise<HttpTerminalChannel> {
    const url = api.url(`/v1/sandboxes/${encodeURIComponent(sandboxId)}/shell`, query).replace(/^http/, 'ws');
    // Loaded on first use: only terminals need it, and the CLI's start-up snapshot cannot hold
    // ws (it reads node:http's bindings at load).
    const { WebSocket } = await import('ws');
    const socket = new WebSocket(url, { headers: api.headers() });
    return new Promise((resolve, reject) => {
      const early: Buffer[] = [];
      const onMessage = (data: Buffer, isBinary: boolean) => {
        if (isBinary) {
          early.push(data);
          return;
        }
        const message = JSON.parse(data.toString('utf8')) as ShellMessage;
        if (message.type === 'started') {
          socket.off('message', onMessage);
          const channel = new HttpTerminalChannel(sandboxId, message.terminalId, socket, api, follow);
          channel.chunks.push(...early);
          resolve(channel);
        } else if (message.type === 'error') {
          reject(problemError(message.problem, sandboxId));
          socket.close();
        }
      };
      socket.on('message', onMessage);
      socket.once('error', reject);
      socket.once('close', () => reject(new Error(`the API closed the shell of sandbox ${sandboxId}`)));
    });
  }

  write(data: Buffer): Promise<void> {
    checked({ kind: 'data', data });
    return this.send(data, true);
  }

  resize(cols: number, rows: number): Promise<void> {
    checked({ kind: 'resize', cols, rows });
    return this.send(JSON.stringify({ type: 'resize', cols, rows }), false);
  }

  async kill(): Promise<void> {
    await this.api.request(
      `/v1/sandboxes/${encodeURIComponent(this.sandboxId)}/processes/${encodeURIComponent(this.id)}`,
      { method: 'DELETE', query: { signal: 'SIGHUP' }, subject: { sandboxId: this.sandboxId } },
    );
  }

  wait(): Promise<ExecResult> {
    return this.follow(this.id, {});
  }

  async *output(options: TerminalOutputOptions): AsyncGenerator<Buffer> {
    if (options.from === 'now') this.chunks.length = 0;
    const stop = () => this.wake?.();
    options.signal?.addEventListener('abort', stop, { once: true });
    try {
      for (;;) {
        if (options.signal?.aborted) return;
        const chunk = this.chunks.shift();
        if (chunk) {
          yield chunk;
          continue;
        }
        if (this.failure) throw this.failure;
        if (this.ended) return;
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
      }
    } finally {
      options.signal?.removeEventListener('abort', stop);
      if (this.ended) this.socket.terminate();
    }
  }

  /** Told once the socket is gone. */
  onEnd(listener: () => void): void {
    if (this.ended) listener();
    else this.ends.push(listener);
  }

  /** Drops the socket (the client is closing). */
  terminate(): void {
    this.socket.terminate();
  }

  private onText(text: string): void {
    let message: ShellMessage;
    try {
      message = JSON.parse(text) as ShellMessage;
    } catch {
      return;
    }
    if (message.type === 'exit') this.end();
    else if (message.type === 'error') this.failure = problemError(message.problem, this.sandboxId);
  }

  private end(err?: Error): void {
    if (!this.ended) for (const listener of this.ends.splice(0)) listener();
    this.ended = true;
    if (err) this.failure ??= err;
    this.wake?.();
  }

  private send(data: Buffer | string, binary: boolean): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.socket.readyState !== this.socket.OPEN) {
        reject(new Error(`the shell of sandbox ${this.sandboxId} is closed`));
        return;
      }
      this.socket.send(data, { binary }, (err) => (err ? reject(err) : resolve()));
    });
  }
}

/** Refuses input the terminal would refuse, as the Redis transport does, before it is sent. */
function checked(input: TerminalInput): void {
  try {
    encodeTerminalInput(input);
  } catch (err) {
    throw new SandboxLimitError((err as Error).message);
  }
}

function problemError(problem: unknown, sandboxId: string): Error {
  const parsed = ProblemBodySchema.safeParse(problem);
  return parsed.success ? errorOfProblem(parsed.data, { sandboxId }) : new Error(JSON.stringify(problem));
}
