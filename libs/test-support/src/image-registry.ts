import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { pollUntil } from './poll.js';
import { freePort } from './ports.js';

export interface RegistryLogin {
  username: string;
  password: string;
}

/**
 * A private image registry (Debian's `docker-registry`, the reference distribution server) on a
 * free loopback port, its storage in a temporary directory, for tests that push and pull images:
 * no outside registry can be reached here. With `login`, every request needs basic auth (an
 * htpasswd file, bcrypt as the server demands). The engine treats `localhost:<port>` as an
 * insecure registry without configuration, so plain HTTP works for push and pull.
 */
export class ImageRegistry {
  /**
   * Why registry tests cannot run here (Debian's docker-registry or htpasswd missing), or false.
   * Under CI=true never a reason: a missing package there is a defect the test must show.
   */
  static unavailable(): string | false {
    if (process.env.CI === 'true') return false;
    const missing = ['docker-registry', 'htpasswd'].filter(
      (command) => spawnSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' }).status !== 0,
    );
    return missing.length > 0
      ? `${missing.join(' and ')} not installed (apt-get install docker-registry apache2-utils; npm test installs them)`
      : false;
  }

  private constructor(
    readonly port: number,
    private readonly dir: string,
    private readonly child: ChildProcess,
    private readonly exited: Promise<void>,
    private output: string[],
  ) {}

  static async start(
    options: { login?: RegistryLogin; startTimeoutMs?: number } = {},
  ): Promise<ImageRegistry> {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), `sandstream-registry-${port}-`));
    const auth = options.login
      ? ['auth:', '  htpasswd:', '    realm: sandstream-test', `    path: ${join(dir, 'htpasswd')}`]
      : [];
    if (options.login) {
      const { username, password } = options.login;
      // -B: bcrypt, the only scheme the registry accepts; -b: the password from the command line.
      const line = execFileSync('htpasswd', ['-Bbn', username, password], { encoding: 'utf8' });
      writeFileSync(join(dir, 'htpasswd'), line);
    }
    const config = [
      'version: 0.1',
      'log:',
      '  level: warn',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${join(dir, 'data')}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: 127.0.0.1:${port}`,
      ...auth,
    ].join('\n');
    writeFileSync(join(dir, 'config.yml'), `${config}\n`);
    const output: string[] = [];
    const child = spawn('docker-registry', ['serve', join(dir, 'config.yml')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [child.stdout, child.stderr]) {
      stream?.on('data', (chunk: Buffer) => {
        output.push(chunk.toString('utf8'));
        if (output.length > 200) output.shift();
      });
    }
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const registry = new ImageRegistry(port, dir, child, exited, output);
    try {
      await pollUntil(
        `docker-registry on ${port} to answer /v2/`,
        async () => {
          if (child.exitCode !== null)
            throw new Error(`docker-registry exited at start-up:\n${registry.log()}`);
          // 200 open, 401 with auth: either way it serves the API.
          const status = await fetch(`http://127.0.0.1:${port}/v2/`).then(
            (r) => r.status,
            () => 0,
          );
          return status === 200 || status === 401;
        },
        { timeoutMs: options.startTimeoutMs ?? 20_000, intervalMs: 100 },
      );
    } catch (err) {
      await registry.stop();
      throw err;
    }
    return registry;
  }

  /** The registry's host as image names spell it: `localhost:<port>`. */
  get host(): string {
    return `localhost:${this.port}`;
  }

  /** What the server printed lately, for a failing test's message. */
  log(): string {
    return this.output.join('');
  }

  /** kill -9, then its storage goes; safe to call twice. */
  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Builds a small image of the test's own under `name`: `base` plus one layer of `bytes` random
 * bytes at /blob and the name at /id, so its top layer exists nowhere else and a pull after
 * removing it has something to download. The Dockerfile goes on stdin (no build context).
 */
export function buildUniqueImage(name: string, base: string, bytes = 3_000_000): void {
  const dockerfile = [
    `FROM ${base}`,
    `RUN head -c ${bytes} /dev/urandom > /blob && echo ${JSON.stringify(name)} > /id`,
  ].join('\n');
  execFileSync('docker', ['build', '-q', '-t', name, '-'], {
    input: dockerfile,
    stdio: ['pipe', 'ignore', 'pipe'],
  });
}

/**
 * Pushes `name` (tagged `<registry host>/…`) with the engine, credentials going in the request's
 * own header (never a `docker login` into the machine's configuration; the engine wants the
 * header even for an open registry), then removes the tag and
 * the image's own layers from the engine so the next use must pull it.
 */
export async function pushAndForget(docker: Docker, name: string, login?: RegistryLogin): Promise<void> {
  const serveraddress = name.slice(0, name.indexOf('/'));
  const stream = await docker.getImage(name).push({ authconfig: { ...login, serveraddress } });
  const events = await new Promise<unknown[]>((resolve, reject) =>
    docker.modem.followProgress(stream, (err: Error | null, out: unknown[]) =>
      err ? reject(err) : resolve(out),
    ),
  );
  const failed = events.find((e) => typeof e === 'object' && e !== null && 'error' in e);
  if (failed) throw new Error(`push of ${name} failed: ${JSON.stringify(failed)}`);
  await docker.getImage(name).remove({ force: true });
}
