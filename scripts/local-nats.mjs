// The embedded NATS of `npm start`, used when no NATS_URL is given: Debian's nats-server as a
// child process on a local port with JetStream on, its store under .cache/nats, so the log
// archive (services/reaper) keeps every job's output past the Redis stream's cap. It listens on
// 127.0.0.1 only: sandboxes reach no host port, and the services and the CLI run here.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createConnection } from 'node:net';
import { join } from 'node:path';
import { stopLeftover } from './leftover-process.mjs';
import { freePort } from './ports.mjs';

/** `cacheDir`: the repository's .cache (tests give their own). */
export function localNatsPaths(cacheDir) {
  const dir = join(cacheDir, 'nats');
  return {
    dir,
    storeDir: join(dir, 'jetstream'),
    logFile: join(dir, 'nats.log'),
    pidFile: join(dir, 'nats.pid'),
  };
}

/** A NATS server greets every connection with an INFO line: that is "up". */
function greets(port) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    const done = (up) => {
      socket.destroy();
      resolve(up);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (chunk) => done(chunk.toString().startsWith('INFO')));
  });
}

/**
 * Starts the embedded NATS and waits until it answers. Returns its URL and a stop() that shuts it
 * down cleanly (SIGINT: nats-server shuts down as on SIGTERM, syncing the JetStream store, but
 * exits 0 where SIGTERM exits 1).
 *
 * @param {{ cacheDir: string }} options
 */
export async function startLocalNats({ cacheDir }) {
  const paths = localNatsPaths(cacheDir);
  mkdirSync(paths.storeDir, { recursive: true, mode: 0o700 });
  await stopLeftover(paths.pidFile, 'nats-server');
  const port = await freePort();
  const child = spawn(
    'nats-server',
    [
      '-a',
      '127.0.0.1',
      '-p',
      String(port),
      '-js',
      '-sd',
      paths.storeDir,
      '-l',
      paths.logFile,
      '-P',
      paths.pidFile,
    ],
    // Its own process group: Ctrl-C must not stop NATS under the services, which drain into it
    // while they shut down; stop() ends it after them.
    { stdio: 'ignore', detached: true },
  );
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  let early;
  exited.then((how) => {
    early = how;
  });
  child.once('error', (err) => {
    early = err.message;
  });

  const deadline = Date.now() + 30_000;
  while (!(await greets(port))) {
    if (early !== undefined) throw new Error(`nats-server exited (${early}); see ${paths.logFile}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`nats-server did not answer on 127.0.0.1:${port} within 30 s; see ${paths.logFile}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    paths,
    async stop() {
      if (early === undefined) child.kill('SIGINT');
      return exited;
    },
  };
}
