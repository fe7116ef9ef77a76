// The Redis and NATS the tests talk to. A machine of this project's kind runs both on their
// standard ports; a fresh machine with only Node and npm does not, so `npm test` then starts its
// own, throwaway (no persistence, a temporary directory), on free ports, and points the tests at
// them with REDIS_URL / NATS_URL. A REDIS_URL or NATS_URL already set is used as it is.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.mjs';

function listening(port) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function startServer(name, command, args, port) {
  const child = spawn(command, args, { stdio: 'ignore' });
  for (let i = 0; i < 100 && child.exitCode === null; i++) {
    if (await listening(port)) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`${name} did not listen on 127.0.0.1:${port}`);
}

/** Sets REDIS_URL / NATS_URL in `env` when needed; returns a stop() for what it started. */
export async function ensureTestServers(env) {
  const started = [];
  const dir = mkdtempSync(join(tmpdir(), 'sandstream-test-servers-'));
  if (!env.REDIS_URL && !(await listening(6379))) {
    const port = await freePort();
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    started.push(await startServer('redis-server', 'redis-server', [...args, '--dir', dir], port));
    env.REDIS_URL = `redis://127.0.0.1:${port}`;
    console.log(`no Redis on 127.0.0.1:6379: the tests use their own on :${port}`);
  }
  if (!env.NATS_URL && !(await listening(4222))) {
    const port = await freePort();
    const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', join(dir, 'nats')];
    started.push(await startServer('nats-server', 'nats-server', args, port));
    env.NATS_URL = `nats://127.0.0.1:${port}`;
    console.log(`no NATS on 127.0.0.1:4222: the tests use their own on :${port}`);
  }
  return () => {
    for (const child of started) child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  };
}
