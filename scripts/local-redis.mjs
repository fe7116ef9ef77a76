// The embedded Redis of `npm start`, used when no REDIS_URL is given: Debian's redis-server as a
// child process on a local port, its data and AOF (appendfsync everysec) under .cache/redis, the
// `default` user disabled (but with its permissions, see aclFileText) and an `admin` user whose generated password stays the same across
// restarts (the AOF outlives a restart, and so must the way in). The URL and namespace go to
// .cache/sandstream/local.json, readable by its owner only, where the CLI finds them.
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { dirname, join } from 'node:path';
import { stopLeftover } from './leftover-process.mjs';
import { freePort } from './ports.mjs';

export const ADMIN_USER = 'admin';

/** `cacheDir`: the repository's .cache (tests give their own, so they never touch a user's). */
export function localRedisPaths(cacheDir) {
  const dir = join(cacheDir, 'redis');
  return {
    dir,
    aclFile: join(dir, 'users.acl'),
    passwordFile: join(dir, 'admin.password'),
    logFile: join(dir, 'redis.log'),
    pidFile: join(dir, 'redis.pid'),
    connectionFile: join(cacheDir, 'sandstream', 'local.json'),
  };
}

function privateFile(path, content) {
  writeFileSync(path, content, { mode: 0o600 });
  // writeFileSync's mode applies only when it creates the file.
  chmodSync(path, 0o600);
}

function adminPassword(paths) {
  if (existsSync(paths.passwordFile)) return readFileSync(paths.passwordFile, 'utf8').trim();
  const password = randomBytes(24).toString('hex');
  privateFile(paths.passwordFile, `${password}\n`);
  return password;
}

/** One RESP round trip: AUTH then PING; resolves true on +PONG. */
function pingWithAuth(port, password) {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('+PONG')) done(true);
      else if (reply.includes('-')) done(false);
    });
    socket.write(`AUTH ${ADMIN_USER} ${password}\r\nPING\r\n`);
  });
}

/**
 * The ACL file's text, written anew at every start, so a file an older version wrote (`user
 * default off`, without permissions) is upgraded in place. `default` is off, so no one logs in
 * as it, but keeps every permission: Redis 7.0/7.2 replay each MULTI/EXEC of the append-only file
 * (every Lua script's effects) as `default` and drop it when `default` may not run it, which
 * loses every job on restart (docs/reliability.md, "`default` off, but with its permissions").
 */
export function aclFileText(adminPasswordHash) {
  return `user default off ~* &* +@all\nuser ${ADMIN_USER} on #${adminPasswordHash} ~* &* +@all\n`;
}

/**
 * Starts the embedded Redis and waits until it answers. Returns its URL and a stop() that shuts
 * it down cleanly (SIGTERM: Redis flushes the AOF before it exits) and removes local.json.
 *
 * @param {{ cacheDir: string, namespace: string, natsUrl?: string, extraBind?: string[], port?: number }} options
 *   natsUrl — the embedded NATS, written into local.json beside the Redis URL for the CLI.
 *   extraBind — addresses to listen on besides loopback: the Docker sandbox bridge's gateway, the
 *   one host address sandboxes on that bridge are sent to for Redis.
 *   port — default: a free one; tests that restart it under running clients keep theirs.
 */
export async function startLocalRedis({ cacheDir, namespace, natsUrl, extraBind = [], port: fixedPort }) {
  const paths = localRedisPaths(cacheDir);
  mkdirSync(paths.dir, { recursive: true, mode: 0o700 });
  mkdirSync(dirname(paths.connectionFile), { recursive: true, mode: 0o700 });
  const password = adminPassword(paths);
  // The hash, not the password, goes into the ACL file. Per-sandbox users the services create
  // later live in memory only (the services re-create them; they are not written back here).
  const hash = createHash('sha256').update(password).digest('hex');
  privateFile(paths.aclFile, aclFileText(hash));

  await stopLeftover(paths.pidFile, 'redis-server');
  const port = fixedPort ?? (await freePort());
  const config = {
    port: String(port),
    bind: ['127.0.0.1', ...extraBind],
    dir: paths.dir,
    appendonly: 'yes',
    appendfsync: 'everysec',
    save: '',
    aclfile: paths.aclFile,
    logfile: paths.logFile,
    pidfile: paths.pidFile,
    daemonize: 'no',
  };
  const child = spawn(
    'redis-server',
    Object.entries(config).flatMap(([key, value]) => [`--${key}`, ...[value].flat()]),
    // Its own process group: Ctrl-C in the terminal must not stop Redis under the services, which
    // still need it to shut down cleanly; stop() ends it after them.
    { stdio: 'ignore', detached: true },
  );
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  let early;
  exited.then((how) => {
    early = how;
  });

  const deadline = Date.now() + 30_000;
  while (!(await pingWithAuth(port, password))) {
    if (early !== undefined) throw new Error(`redis-server exited (${early}); see ${paths.logFile}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not answer on 127.0.0.1:${port} within 30 s; see ${paths.logFile}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }

  const url = `redis://${ADMIN_USER}:${password}@127.0.0.1:${port}`;
  privateFile(
    paths.connectionFile,
    `${JSON.stringify({ redisUrl: url, namespace, ...(natsUrl ? { natsUrl } : {}), pid: process.pid }, null, 2)}\n`,
  );
  return {
    url,
    port,
    paths,
    async stop() {
      rmSync(paths.connectionFile, { force: true });
      if (early === undefined) child.kill('SIGTERM');
      return exited;
    },
  };
}
