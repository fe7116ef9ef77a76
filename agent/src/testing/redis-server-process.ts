import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

/** A free TCP port on 127.0.0.1 (bound and released; fine for tests on one machine). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * A private redis-server for tests that kill, pause or restart Redis (never the shared one).
 * No persistence: a restart comes back empty, like a lost Redis pod.
 */
export interface RedisServerOptions {
  /** Extra redis-server arguments (e.g. ACL users). */
  args?: string[];
  /** Serve TLS only, with this certificate (PEM files); clients must trust `certPem`. */
  tls?: { certFile: string; keyFile: string; certPem: string };
}

export class RedisServerProcess {
  private child: ChildProcess | null = null;

  private constructor(
    readonly port: number,
    private readonly options: RedisServerOptions,
  ) {}

  static async start(options: RedisServerOptions = {}): Promise<RedisServerProcess> {
    const server = new RedisServerProcess(await freePort(), options);
    await server.spawn();
    return server;
  }

  get url(): string {
    return `${this.options.tls ? 'rediss' : 'redis'}://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async spawn(): Promise<void> {
    const { tls, args = [] } = this.options;
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
    this.child = spawn(
      'redis-server',
      [...listen, '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args],
      {
        stdio: 'ignore',
      },
    );
    const deadline = Date.now() + 10_000;
    for (;;) {
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
        return;
      } catch (err) {
        // An answer that refuses us (NOAUTH with requirepass) still means the server is up.
        if ((err as Error).name === 'ReplyError') return;
        if (Date.now() > deadline) throw new Error(`redis-server on ${this.port} did not start`);
        await new Promise((r) => setTimeout(r, 50));
      } finally {
        probe.disconnect();
      }
    }
  }

  /** kill -9: the server vanishes mid-conversation. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
    this.child = null;
  }

  /** SIGSTOP / SIGCONT: Redis stays connected but answers nothing (a very slow Redis). */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    this.resume();
    await this.kill();
  }
}
