import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKeySpace, QueueNames } from '@sandstream/bus';
import {
  freePort,
  repoRoot,
  startRedisServer,
  testRedisUrl,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { SandstreamClient } from '../client.js';

// The built CLI as a user runs it (libs/client must be built: npx tsc -b libs/client).
const dir = mkdtempSync(join(tmpdir(), 'cli-'));
const namespace = uniqueNamespace('cli');
const redis = new Redis(testRedisUrl());

function cli(...args: string[]) {
  return cliIn({ REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: namespace }, undefined, ...args);
}

/** The CLI with only `env` for its connection (none of the caller's REDIS_URL…), run in `cwd`. */
function cliIn(env: Record<string, string>, cwd: string | undefined, ...args: string[]) {
  const { REDIS_URL: _url, SANDSTREAM_NAMESPACE: _ns, ...rest } = process.env;
  return spawnSync(process.execPath, [join(repoRoot, 'libs/client/dist/cli/main.js'), ...args], {
    env: { ...rest, ...env },
    ...(cwd ? { cwd } : {}),
    encoding: 'utf8',
    timeout: 90_000,
  });
}

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  redis.disconnect();
});

describe('sandstream CLI', () => {
  it('refuses an invalid job file with file, line, field and rule, exit 2, nothing queued', async () => {
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'image: debian\nsteps:\n  - command: ""\n');
    const run = cli('submit', file);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/bad\.yaml:3:\d+: steps\.0\.command: command must not be empty/);
    const queue = new Queue(QueueNames.jobs, {
      connection: redis,
      prefix: createKeySpace(namespace).bullPrefix,
    });
    expect(await queue.count()).toBe(0);
    await queue.close();
  });

  it('submits a valid file and reports the job id; status shows it queued', () => {
    const file = join(dir, 'ok.yaml');
    writeFileSync(file, `id: ${namespace}-ok\nimage: debian\nsteps:\n  - command: "true"\n`);
    const run = cli('submit', file);
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toBe(`${namespace}-ok`);
    const status = cli('status', `${namespace}-ok`);
    expect(status.stdout).toMatch(/state\s+queued/);
    const again = cli('submit', file);
    expect(again.stderr).toMatch(/already submitted/);
  });

  it('on a terminal prints the submitted job id once (stdout and stderr both show there)', () => {
    const file = join(dir, 'tty.yaml');
    writeFileSync(file, `id: ${namespace}-tty\nimage: debian\nsteps:\n  - command: "true"\n`);
    // script(1) runs it on a pseudo-terminal, as npm start's demo runs on the user's.
    const main = join(repoRoot, 'libs/client/dist/cli/main.js');
    const run = spawnSync('script', ['-qec', `${process.execPath} ${main} submit ${file}`, '/dev/null'], {
      env: { ...process.env, REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: namespace },
      encoding: 'utf8',
      timeout: 90_000,
    });
    expect(run.status, run.stdout).toBe(0);
    expect(run.stdout.split(`${namespace}-tty`)).toHaveLength(2);
    expect(run.stdout).toMatch(new RegExp(`^submitted ${namespace}-tty\r?$`, 'm'));
  });

  it('cancels a queued job by its state change', () => {
    const file = join(dir, 'c.yaml');
    writeFileSync(file, `id: ${namespace}-c\nimage: debian\nsteps:\n  - command: "true"\n`);
    expect(cli('submit', file).status).toBe(0);
    expect(cli('cancel', `${namespace}-c`).status).toBe(0);
    const status = cli('status', `${namespace}-c`);
    expect(status.stdout).toMatch(/state\s+cancelled/);
    expect(status.status).toBe(130);
    expect(cli('ls', '--state', 'cancelled').stdout).toContain(`${namespace}-c`);
  });

  it('exits when its command is done, even with a timer of the process still running', () => {
    // A 1,000 s interval started before the CLI (as ioredis' reply parser leaves one running for
    // ~2 s after a large reply, as each chunk of a `cp` download is): the CLI still ends at once.
    const run = spawnSync(
      process.execPath,
      [
        '--import',
        'data:text/javascript,setInterval(() => {}, 1e6)',
        join(repoRoot, 'libs/client/dist/cli/main.js'),
        'ls',
      ],
      {
        env: { ...process.env, REDIS_URL: testRedisUrl(), SANDSTREAM_NAMESPACE: namespace },
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    expect(run).toMatchObject({ status: 0, signal: null, stderr: '' });
  });

  it('explains bad usage with exit 2', () => {
    expect(cli('frobnicate').status).toBe(2);
    expect(cli('ls', '--state', 'nope').stderr).toMatch(/--state must be one of/);
  });

  it('refuses an unknown flag, naming it and the nearest valid one, exit 2', () => {
    const run = cli('status', 'some-job', '--namespce', 'x');
    expect(run.status).toBe(2);
    expect(run.stderr).toBe('sandstream: unknown flag --namespce (did you mean --namespace?)\n');
  });

  it('exits 4 (not found) for status, logs and cancel of a job that does not exist', () => {
    for (const command of ['status', 'logs', 'cancel']) {
      const run = cli(command, `${namespace}-nope`);
      expect({ command, status: run.status, stderr: run.stderr }).toEqual({
        command,
        status: 4,
        stderr: `sandstream: job ${namespace}-nope not found\n`,
      });
    }
  });

  it('warns on submit when no scheduler serves the namespace', () => {
    const file = join(dir, 'w.yaml');
    writeFileSync(file, `id: ${namespace}-w\nimage: debian\nsteps:\n  - command: "true"\n`);
    const run = cli('submit', file);
    expect(run.status).toBe(0);
    expect(run.stderr).toContain(
      `sandstream: warning: no scheduler is connected to namespace "${namespace}" (is npm start running, and is --namespace right?)\n`,
    );
  });

  it('prints one line and exits 3, promptly, when nothing listens at the Redis URL', async () => {
    const port = await freePort();
    const started = Date.now();
    const run = cliIn({ REDIS_URL: `redis://127.0.0.1:${port}` }, undefined, 'status', 'x');
    expect(Date.now() - started).toBeLessThan(5000);
    expect(run.status).toBe(3);
    expect(run.stderr).toBe(
      `sandstream: cannot reach Redis at redis://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
  });

  it('over the HTTP API: one line and exit 3 when nothing listens at --url; a Redis flag or apikey with it is exit 2', async () => {
    const port = await freePort();
    const run = cliIn({ SANDSTREAM_URL: `http://127.0.0.1:${port}` }, undefined, 'status', 'x');
    expect(run.status).toBe(3);
    expect(run.stderr).toMatch(
      new RegExp(`^sandstream: cannot reach the API at http://127.0.0.1:${port}: .*ECONNREFUSED.*\\n$`),
    );
    const mixed = cliIn({}, undefined, 'ls', '--url', 'http://127.0.0.1:1', '--namespace', 'x');
    expect(mixed.status).toBe(2);
    expect(mixed.stderr).toMatch(/--url \(the HTTP API\) does not go with --namespace/);
    const keys = cliIn({ SANDSTREAM_URL: 'http://127.0.0.1:1' }, undefined, 'apikey', 'ls');
    expect(keys.status).toBe(2);
    expect(keys.stderr).toMatch(/apikey ls manages keys in Redis directly/);
  });

  it('prints one line and exits 3 when Redis goes away under logs -f and stays away', async () => {
    const own = await startRedisServer();
    const client = new SandstreamClient({ redisUrl: own.url, namespace, onWarning: () => {} });
    const jobId = `${namespace}-lost`;
    await client.submit({ id: jobId, image: 'debian', steps: [{ command: 'true' }] });
    await client.close();
    const child = spawn(
      process.execPath,
      [join(repoRoot, 'libs/client/dist/cli/main.js'), 'logs', '-f', jobId],
      {
        env: { ...process.env, REDIS_URL: own.url, SANDSTREAM_NAMESPACE: namespace },
      },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      await vi.waitUntil(() => stderr.includes('● queued'), { timeout: 20_000, interval: 50 });
      await own.stop();
      expect(await exited).toBe(3);
      expect(stderr).toBe(
        `● queued\nsandstream: lost Redis at ${own.url}: connect ECONNREFUSED 127.0.0.1:${own.port}\n`,
      );
    } finally {
      child.kill('SIGKILL');
      await own.stop();
    }
  }, 90_000);

  it("finds npm start's Redis and namespace through .cache/sandstream/local.json, with no flags", async () => {
    // Like npm start's embedded Redis: its own port, `default` off, an admin user with a password.
    const own = await startRedisServer({
      args: ['--user', 'default', 'off', '--user', 'admin', 'on', '>pw', '~*', '&*', '+@all'],
    });
    const ownUrl = `redis://admin:pw@127.0.0.1:${own.port}`;
    const project = mkdtempSync(join(tmpdir(), 'cli-local-'));
    const below = join(project, 'sub', 'dir');
    mkdirSync(below, { recursive: true });
    mkdirSync(join(project, '.cache', 'sandstream'), { recursive: true });
    const local = uniqueNamespace('cli-local');
    writeFileSync(
      join(project, '.cache', 'sandstream', 'local.json'),
      JSON.stringify({ redisUrl: ownUrl, namespace: local, pid: process.pid }),
      { mode: 0o600 },
    );
    const seeded = new SandstreamClient({ redisUrl: ownUrl, namespace: local, onWarning: () => {} });
    try {
      await seeded.submit({ id: `${local}-seeded`, image: 'debian', steps: [{ command: 'true' }] });
      const status = cliIn({}, below, 'status', `${local}-seeded`);
      expect(status.stderr).toBe('');
      expect(status.stdout).toMatch(/state\s+queued/);
      writeFileSync(join(below, 'l.yaml'), `id: ${local}-l\nimage: debian\nsteps:\n  - command: "true"\n`);
      expect(cliIn({}, below, 'submit', 'l.yaml').status).toBe(0);
      expect(await seeded.get(`${local}-l`)).toMatchObject({ state: 'queued' });
      // The namespace is the file's (job records are not namespaced, the lists are); a flag wins.
      expect(cliIn({}, below, 'ls').stdout).toContain(`${local}-l`);
      expect(cliIn({}, below, 'ls', '--namespace', namespace).stdout).not.toContain(`${local}-l`);
    } finally {
      await seeded.close();
      await own.stop();
      rmSync(project, { recursive: true, force: true });
    }
  });
});
