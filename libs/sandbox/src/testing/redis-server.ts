import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

/** A free TCP port on 127.0.0.1 (bound and released; fine for tests on one machine). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface OwnRedis {
  port: number;
  url: string;
  child: ChildProcess;
  dir: string;
  stop: () => Promise<void>;
}

/**
 * A private redis-server on a free port, without persistence, for suites that must measure it
 * alone, change its configuration (requirepass, …) or kill it; the shared Redis is never touched.
 * `url` carries no password: a suite that sets one builds its own.
 */
export async function startOwnRedis(extraArgs: string[] = []): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), `redis-${port}-`));
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      ...extraArgs,
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const probe = new Redis({
    port,
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
    enableReadyCheck: false,
  });
  probe.on('error', () => {});
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await probe.connect();
      await probe.ping();
      break;
    } catch (err) {
      // An answer that refuses us (NOAUTH with requirepass) still means the server is up.
      if ((err as Error).name === 'ReplyError') break;
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`redis-server on ${port} did not start`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  probe.disconnect();
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    child,
    dir,
    stop: async () => {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
