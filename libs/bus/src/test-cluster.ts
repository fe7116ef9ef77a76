import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * A throwaway three-master Redis Cluster of real redis-server processes on free ports (tests
 * only: no persistence, own temp directory), so cluster behaviour — CROSSSLOT refusals, slot
 * routing, per-node ACLs — is tested for real rather than assumed.
 */
export class TestCluster {
  private constructor(
    readonly ports: number[],
    private readonly servers: ChildProcess[],
    private readonly dir: string,
  ) {}

  static async start(masters = 3): Promise<TestCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'sandstream-cluster-'));
    const ports: number[] = [];
    for (let i = 0; i < masters; i++) ports.push(await freePort());
    const servers = ports.map((port) =>
      spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, `nodes-${port}.conf`),
          '--dir',
          dir,
          '--save',
          '',
          '--appendonly',
          'no',
        ],
        { stdio: 'ignore' },
      ),
    );
    const cluster = new TestCluster(ports, servers, dir);
    try {
      for (const port of ports) await waitForPing(port);
      await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-yes']);
      for (let i = 0; i < 100; i++) {
        const { stdout } = await run('redis-cli', ['-p', String(ports[0]), 'CLUSTER', 'INFO']);
        if (stdout.includes('cluster_state:ok')) return cluster;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('test cluster did not reach cluster_state:ok');
    } catch (err) {
      await cluster.stop();
      throw err;
    }
  }

  get nodes(): { host: string; port: number }[] {
    return this.ports.map((port) => ({ host: '127.0.0.1', port }));
  }

  async stop(): Promise<void> {
    await Promise.all(
      this.servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            if (s.exitCode !== null) return resolve();
            s.once('exit', () => resolve());
            s.kill('SIGTERM');
          }),
      ),
    );
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function waitForPing(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    try {
      const { stdout } = await run('redis-cli', ['-p', String(port), 'PING']);
      if (stdout.trim() === 'PONG') return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`redis-server on port ${port} did not start`);
}
