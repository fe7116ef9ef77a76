import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { pollUntil } from './poll.js';
import { freePort } from './ports.js';

export interface RedisServerOptions {
  /** Extra redis-server arguments (requirepass, ACL users, cluster mode, maxclients …). */
  args?: string[];
  /** Address to listen on (default 127.0.0.1; a Docker network's gateway for containers). */
  host?: string;
  /** Serve TLS only, with this certificate (PEM files); clients must trust `certPem`. */
  tls?: { certFile: string; keyFile: string; certPem: string };
  /**
   * Append-only file with `appendfsync everysec`, as the quick start and the manifests run Redis:
   * a `kill()` then `start()` comes back with what was fsynced. Without it a restart is empty,
   * like a lost Redis pod.
   */
  appendOnly?: boolean;
  /**
   * A shipped configuration file (its `dir`, `aclfile` and other paths already pointing into the
   * test's files), passed first, as redis-server requires. Only the port, the address and `dir`
   * are given after it.
   */
  configFile?: string;
  /**
   * Persistence exactly as `configFile` and `args` say (a shipped configuration run as it is),
   * instead of `appendOnly`'s choice.
   */
  asConfigured?: boolean;
  startTimeoutMs?: number;
}

/**
 * A private redis-server on a free port in its own temporary directory, for tests that must
 * measure Redis alone, change its configuration, or kill, pause and restart it. The shared Redis
 * is never touched. `url` carries no password: a test that sets one builds its own.
 */
export class RedisServer {
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();

  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly options: RedisServerOptions,
  ) {}

  static async start(options: RedisServerOptions = {}): Promise<RedisServer> {
    const host = options.host ?? '127.0.0.1';
    const port = await freePort(host);
    const server = new RedisServer(port, mkdtempSync(join(tmpdir(), `sandstream-redis-${port}-`)), options);
    try {
      await server.start();
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  get host(): string {
    return this.options.host ?? '127.0.0.1';
  }

  get url(): string {
    return `${this.options.tls ? 'rediss' : 'redis'}://${this.host}:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** True while the process runs (including while paused). */
  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Starts the process (again, after `kill()`) on the same port and waits until it answers.
   * `empty` throws the data directory away first (only matters with `appendOnly`).
   */
  async start(options: { empty?: boolean } = {}): Promise<void> {
    if (this.running) throw new Error(`redis-server on ${this.port} is already running`);
    if (options.empty) rmSync(this.dir, { recursive: true, force: true });
    mkdirSync(this.dir, { recursive: true });
    const { tls, args = [], appendOnly } = this.options;
    const listen = tls
      ? [
          '--port',
          '0',
          '--tls-port',
          String(this.port),
          '--tls-cert-file',
          tls.certFile,
          '--tls-key-file',
          tls.keyFile,
          '--tls-auth-clients',
          'no',
        ]
      : ['--port', String(this.port)];
    const persistence = this.options.asConfigured
      ? []
      : [
          '--save',
          '',
          ...(appendOnly ? ['--appendonly', 'yes', '--appendfsync', 'everysec'] : ['--appendonly', 'no']),
        ];
    const child = spawn(
      'redis-server',
      [
        ...(this.options.configFile ? [this.options.configFile] : []),
        ...listen,
        '--bind',
        this.host,
        '--dir',
        this.dir,
        ...persistence,
        ...args,
      ],
      { stdio: 'ignore' },
    );
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    await this.waitUntilServing(child);
  }

  private async waitUntilServing(child: ChildProcess): Promise<void> {
    await pollUntil(
      `redis-server on ${this.port} to answer`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`redis-server on ${this.port} exited at start-up (port taken or bad arguments?)`);
        const probe = new Redis(this.url, {
          lazyConnect: true,
          maxRetriesPerRequest: 0,
          retryStrategy: () => null,
          enableReadyCheck: false,
          ...(this.options.tls ? { tls: { ca: this.options.tls.certPem } } : {}),
        });
        probe.on('error', () => {});
        try {
          await probe.connect();
          await probe.ping();
          return true;
        } catch (err) {
          // A refusal (NOAUTH with requirepass) still means the server is up; LOADING (replaying
          // the append-only file) means it is not serving yet.
          const { name, message } = err as Error;
          return name === 'ReplyError' && !message.startsWith('LOADING');
        } finally {
          probe.disconnect();
        }
      },
      { timeoutMs: this.options.startTimeoutMs ?? 20_000, intervalMs: 50 },
    );
  }

  /** kill -9: no shutdown, no final fsync; the server vanishes mid-conversation, exactly a crash. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM: a clean shutdown (Redis fsyncs its append-only file first), as an orchestrator stops it. */
  async terminate(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    child.kill('SIGTERM');
    await this.exited;
  }

  /** SIGSTOP: Redis stays connected but answers nothing (a very slow Redis). */
  pause(): void {
    if (this.running) this.child?.kill('SIGSTOP');
  }

  /** SIGCONT after `pause()`. */
  resume(): void {
    if (this.running) this.child?.kill('SIGCONT');
  }

  /** Ends the process and removes its directory; safe to call twice. */
  async stop(): Promise<void> {
    this.resume();
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  return RedisServer.start(options);
}
