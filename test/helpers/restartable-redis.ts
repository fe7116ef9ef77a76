import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '../../libs/sandbox/src/testing/redis-server.js';

/**
 * A private redis-server with AOF (`appendfsync everysec`, as the quick start and the manifests
 * run it) that a test can kill -9 and bring back on the same port, with its data or empty.
 * The shared Redis is never touched.
 */
export interface RestartableRedis {
  readonly port: number;
  readonly url: string;
  /** kill -9: no shutdown, no final fsync, exactly a crash. */
  crash: () => Promise<void>;
  /** Starts it again on the same port; `empty` throws the AOF away first. */
  start: (options?: { empty?: boolean }) => Promise<void>;
  stop: () => Promise<void>;
}

export async function startRestartableRedis(): Promise<RestartableRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `redis-aof-${port}-`));
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async (options: { empty?: boolean } = {}) => {
    if (options.empty) rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', ''];
    args.push('--appendonly', 'yes', '--appendfsync', 'everysec');
    child = spawn('redis-server', args, { stdio: 'ignore' });
    const current = child;
    exited = new Promise((resolve) => current.once('exit', () => resolve()));
    await waitUntilServing(port, current);
  };

  const crash = async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  };

  await start();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    crash,
    start,
    stop: async () => {
      await crash();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function waitUntilServing(port: number, child: ChildProcess): Promise<void> {
  const probe = new Redis({
    port,
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    enableReadyCheck: false,
  });
  probe.on('error', () => {});
  const deadline = Date.now() + 20_000;
  try {
    for (;;) {
      try {
        await probe.connect();
        // LOADING while the AOF is replayed: not serving yet.
        await probe.ping();
        return;
      } catch {
        probe.disconnect();
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(`redis-server on ${port} did not start`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  } finally {
    probe.disconnect();
  }
}
