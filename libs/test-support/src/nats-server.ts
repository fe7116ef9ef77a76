import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pollUntil } from './poll.js';
import { freePort } from './ports.js';

/** The NATS server the machine runs (NATS_URL, default 127.0.0.1:4222), for tests that only publish and subscribe. */
export function testNatsUrl(): string {
  return process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
}

/**
 * A private nats-server on a free port (JetStream on, its store in a temporary directory), for
 * tests that must kill NATS or see a clean JetStream.
 */
export class NatsServer {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly args: string[],
    private child: ChildProcess,
    private exited: Promise<void>,
  ) {}

  static async start(options: { jetstream?: boolean; startTimeoutMs?: number } = {}): Promise<NatsServer> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), `sandstream-nats-${port}-`));
    const args = ['-a', '127.0.0.1', '-p', String(port)];
    if (options.jetstream !== false) args.push('-js', '-sd', dir);
    const { child, exited } = spawnServer(args);
    const server = new NatsServer(port, dir, args, child, exited);
    try {
      await server.awaitGreeting(options.startTimeoutMs);
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  /** The server process's id (a bench reads its CPU time from /proc). */
  get pid(): number | undefined {
    return this.child.pid;
  }

  private async awaitGreeting(timeoutMs = 10_000): Promise<void> {
    const { port, child } = this;
    await pollUntil(
      `nats-server on ${port} to greet`,
      async () => {
        if (child.exitCode !== null) throw new Error(`nats-server on ${port} exited at start-up`);
        return answersInfo(port);
      },
      { timeoutMs, intervalMs: 50 },
    );
  }

  /** kill -9 (an outage); its store stays for resume(). */
  async halt(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }

  /**
   * SIGSTOP: the server holds its connections but answers nothing (a stalled store, not an
   * outage a client would notice and reconnect from) until unfreeze().
   */
  freeze(): void {
    this.child.kill('SIGSTOP');
  }

  /** SIGCONT after freeze(): it answers what came meanwhile. */
  unfreeze(): void {
    this.child.kill('SIGCONT');
  }

  /** The same server back on the same port and store, after halt(). */
  async resume(): Promise<void> {
    const { child, exited } = spawnServer(this.args);
    this.child = child;
    this.exited = exited;
    await this.awaitGreeting();
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** kill -9, then the directory goes; safe to call twice. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function spawnServer(args: string[]): { child: ChildProcess; exited: Promise<void> } {
  const child = spawn('nats-server', args, { stdio: 'ignore' });
  return { child, exited: new Promise<void>((resolve) => child.once('exit', () => resolve())) };
}

/** A NATS server greets every new connection with an INFO line: that is "up". */
function answersInfo(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const done = (up: boolean) => {
      socket.destroy();
      resolve(up);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (chunk) => done(chunk.toString().startsWith('INFO')));
  });
}

export function startNatsServer(options: { jetstream?: boolean } = {}): Promise<NatsServer> {
  return NatsServer.start(options);
}
