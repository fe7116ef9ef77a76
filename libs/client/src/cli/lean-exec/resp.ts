import { connect, type Socket } from 'node:net';

/**
 * A minimal Redis client over node:net for the lean `exec` (lean-exec.ts): RESP2 requests and
 * replies, pipelined in order, for the handful of commands `exec` sends (EVALSHA/EVAL, XREAD,
 * HGET, MULTI/EXEC, LPUSH). ioredis costs ~12 ms of start-up alone (docs/benchmarks.md, "CLI
 * start-up, part 4"); this is a few hundred lines the process compiles lazily.
 *
 * Reconnects as the full CLI's ioredis is set up to (connect-redis.ts): once ready, up to
 * `reconnects` times, waiting min(n × 200, 1000) ms, and sends again the commands that had no
 * reply (every command `exec` repeats is a read, or its cancel, which the agent takes once).
 */
export type RespReply = string | number | null | RespReply[] | RespError;

/** An error reply (`-ERR …`), given back as a value inside MULTI's EXEC array, thrown otherwise. */
export class RespError extends Error {
  override readonly name = 'ReplyError';
}

export interface RespTarget {
  host: string;
  port: number;
  username?: string | undefined;
  password?: string | undefined;
  db?: number | undefined;
}

interface Pending {
  args: readonly (string | number)[];
  resolve: (reply: RespReply) => void;
  reject: (err: Error) => void;
}

export class RespConnection {
  private socket: Socket | undefined;
  private buffer: Buffer = Buffer.alloc(0);
  /** Sent (or to be sent on the next connection), oldest first; replies arrive in this order. */
  private readonly pending: Pending[] = [];
  /** Set up commands (AUTH, SELECT) whose replies come before any of `pending`'s. */
  private handshakeReplies = 0;
  private ready = false;
  private everReady = false;
  private closed = false;
  private attempts = 0;
  private lastError: Error | undefined;

  constructor(
    private readonly target: RespTarget,
    private readonly options: { reconnects: number; connectTimeoutMs: number },
  ) {}

  /** The last socket error (the "lost Redis at …: <cause>" message names it). */
  get lastSocketError(): Error | undefined {
    return this.lastError;
  }

  /** Connects once; rejects with the socket's error (the caller then gives up before any write). */
  open(): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => fail(new Error(`no answer within ${this.options.connectTimeoutMs / 1000} s`)),
        this.options.connectTimeoutMs,
      );
      const fail = (err: Error) => {
        clearTimeout(timer);
        this.lastError = err;
        this.closed = true;
        this.socket?.destroy();
        reject(err);
      };
      this.dial(() => {
        clearTimeout(timer);
        resolve();
      }, fail);
    });
  }

  private dial(onReady: () => void, onFail: (err: Error) => void): void {
    const socket = connect({ host: this.target.host, port: this.target.port, noDelay: true });
    this.socket = socket;
    this.buffer = Buffer.alloc(0);
    let up = false;
    socket.on('connect', () => {
      up = true;
      const setup: (string | number)[][] = [];
      if (this.target.password !== undefined)
        setup.push(
          this.target.username
            ? ['AUTH', this.target.username, this.target.password]
            : ['AUTH', this.target.password],
        );
      if (this.target.db) setup.push(['SELECT', this.target.db]);
      this.handshakeReplies = setup.length;
      this.ready = true;
      this.everReady = true;
      this.attempts = 0;
      socket.write(setup.map(encode).join('') + this.pending.map((p) => encode(p.args)).join(''));
      onReady();
    });
    socket.on('data', (chunk) => this.onData(chunk));
    socket.on('error', (err) => {
      this.lastError = err;
      if (!up) onFail(err);
    });
    socket.on('close', () => {
      this.ready = false;
      if (up) this.onLost();
    });
  }

  private onLost(): void {
    if (this.closed) return;
    this.attempts += 1;
    if (!this.everReady || this.attempts > this.options.reconnects) {
      this.closed = true;
      const err = new Error('Connection is closed.');
      for (const p of this.pending.splice(0)) p.reject(err);
      return;
    }
    setTimeout(
      () =>
        this.dial(
          () => {},
          () => this.onLost(),
        ),
      Math.min(this.attempts * 200, 1000),
    );
  }

  /** Sends one command; its reply (an error reply rejects with RespError). */
  send(...args: (string | number)[]): Promise<RespReply> {
    return new Promise((resolve, reject) => {
      if (this.closed) {
        reject(new Error('Connection is closed.'));
        return;
      }
      this.pending.push({ args, resolve, reject });
      if (this.ready) this.socket?.write(encode(args));
    });
  }

  /** Closes the socket at once, answering nothing more. */
  close(): void {
    this.closed = true;
    this.socket?.destroy();
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const parsed = parseReply(this.buffer, 0);
      if (parsed === undefined) return;
      this.buffer = this.buffer.subarray(parsed.end);
      if (this.handshakeReplies > 0) {
        this.handshakeReplies -= 1;
        if (parsed.reply instanceof RespError) {
          // AUTH or SELECT refused: nothing on this connection can work.
          this.lastError = parsed.reply;
          this.closed = true;
          for (const p of this.pending.splice(0)) p.reject(parsed.reply);
          this.socket?.destroy();
          return;
        }
        continue;
      }
      const next = this.pending.shift();
      if (!next) continue;
      if (parsed.reply instanceof RespError) next.reject(parsed.reply);
      else next.resolve(parsed.reply);
    }
  }
}

function encode(args: readonly (string | number)[]): string {
  let out = `*${args.length}\r\n`;
  for (const arg of args) {
    const s = String(arg);
    out += `$${Buffer.byteLength(s, 'utf8')}\r\n${s}\r\n`;
  }
  return out;
}

/** One reply from `buf` at `at`, or undefined when it has not all arrived yet. */
export function parseReply(buf: Buffer, at: number): { reply: RespReply; end: number } | undefined {
  const lineEnd = buf.indexOf('\r\n', at);
  if (lineEnd < 0) return undefined;
  const type = buf[at];
  const line = buf.toString('utf8', at + 1, lineEnd);
  const next = lineEnd + 2;
  switch (type) {
    case 0x2b: // +
      return { reply: line, end: next };
    case 0x2d: // -
      return { reply: new RespError(line), end: next };
    case 0x3a: // :
      return { reply: Number(line), end: next };
    case 0x24: {
      // $
      const length = Number(line);
      if (length < 0) return { reply: null, end: next };
      if (buf.length < next + length + 2) return undefined;
      return { reply: buf.toString('utf8', next, next + length), end: next + length + 2 };
    }
    case 0x2a: {
      // *
      const count = Number(line);
      if (count < 0) return { reply: null, end: next };
      const items: RespReply[] = [];
      let end = next;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buf, end);
        if (item === undefined) return undefined;
        items.push(item.reply);
        end = item.end;
      }
      return { reply: items, end };
    }
    default:
      throw new Error(`unexpected reply from Redis (type byte ${type})`);
  }
}

/**
 * The parts of a redis:// URL this client handles: host, port, user, password, database. Anything
 * else (rediss://, a socket path, query options) is undefined: the full CLI (ioredis) takes it.
 */
export function respTargetOf(url: string): RespTarget | undefined {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'redis:' || parsed.search !== '' || parsed.hash !== '' || parsed.hostname === '')
    return undefined;
  const path = parsed.pathname.replace(/^\//, '');
  if (!/^\d*$/.test(path)) return undefined;
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  return {
    host,
    port: parsed.port ? Number(parsed.port) : 6379,
    ...(parsed.username ? { username: decodeURIComponent(parsed.username) } : {}),
    ...(parsed.password ? { password: decodeURIComponent(parsed.password) } : {}),
    ...(path ? { db: Number(path) } : {}),
  };
}
