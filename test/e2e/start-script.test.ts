import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { logArchiveNames } from '@sandstream/bus';
import { freePort, repoRoot, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { connect as connectNats } from 'nats';
import { describe, expect, it, vi } from 'vitest';
import { spawnStartScript } from '../helpers/start-script.js';

// `npm start` as a user runs it: five services up, hello.yaml streamed, Ctrl-C stops all.
describe('npm start (scripts/start.mjs)', () => {
  it('starts the services, runs examples/hello.yaml and stops everything on SIGINT', async () => {
    const namespace = uniqueNamespace('start');
    // Its embedded NATS keeps its store here, not in the user's .cache.
    const cacheDir = mkdtempSync(join(tmpdir(), 'sandstream-start-cache-'));
    const { NATS_URL: _noNats, ...parentEnv } = process.env;
    const apiPort = await freePort();
    const { child, output, exited } = spawnStartScript(
      ['--namespace', namespace, '--scale', 'dispatcher=2', '--scale', 'api=2'],
      {
        ...parentEnv,
        API_PORT: String(apiPort),
        SANDSTREAM_CACHE_DIR: cacheDir,
        REDIS_URL: testRedisUrl(),
        SANDBOX_TYPE: 'inprocess',
        SANDSTREAM_SKIP_BOOTSTRAP: '1',
      },
    );
    // Until the demo job is done (or the script died); the assertions below say which.
    await vi
      .waitUntil(() => output().includes('press Ctrl-C') || child.exitCode !== null, {
        timeout: 180_000,
        interval: 200,
      })
      .catch(() => undefined);
    expect(output()).toMatch(/✓ step-dispatcher#2 ready/);
    // The backend it chose and why, on the terminal.
    expect(output()).toContain('sandbox backend: inprocess (SANDBOX_TYPE=inprocess is set; ');
    // The demo's job id once: "submitted <id>" (stdout is not a terminal here, so the id alone too).
    expect(output()).toMatch(/^submitted \S+$/m);
    expect(output()).toMatch(/▶ step-4 {2}find the greeting — grep: hello in hello/);
    expect(output()).toContain('  │ hello from sandstream');
    expect(output()).toMatch(/job finished \(sandstream exit code 0\)/);
    // Both API replicas print their URL; the first on API_PORT, anonymous from loopback allowed.
    const urls = [
      ...output().matchAll(/✓ api#\d ready .*HTTP API and web console (http:\/\/127\.0\.0\.1:\d+)/g),
    ].map((m) => m[1]);
    expect(urls).toHaveLength(2);
    expect(urls[0]).toBe(`http://127.0.0.1:${apiPort}`);
    for (const url of urls) {
      const res = await fetch(`${url}/v1/jobs?limit=1`);
      expect(res.status).toBe(200);
    }
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    for (const name of [
      'scheduler',
      'pod-lifecycle',
      'step-dispatcher#1',
      'step-dispatcher#2',
      'reaper',
      'api#1',
      'api#2',
    ]) {
      expect(output()).toContain(`  ${name}: exited 0`);
    }
    expect(output()).toContain('  embedded NATS: exited 0');
    rmSync(cacheDir, { recursive: true, force: true });
  }, 240_000);

  it('says on the terminal why a service could not start, and starts one whose port was taken meanwhile again on another', async () => {
    const namespace = uniqueNamespace('start-clash');
    const cacheDir = mkdtempSync(join(tmpdir(), 'sandstream-start-cache-'));
    const apiPort = await freePort();
    // Free on 127.0.0.1, where start.mjs looks, but taken for an API listening on every address:
    // the API exits with EADDRINUSE after start.mjs chose its port, as when another program binds
    // it in between.
    const squatter = createServer();
    await new Promise<void>((resolve) => squatter.listen(apiPort, '127.0.0.2', resolve));
    const { NATS_URL: _noNats, ...parentEnv } = process.env;
    const { child, output, exited } = spawnStartScript(['--namespace', namespace, '--no-job'], {
      ...parentEnv,
      API_PORT: String(apiPort),
      API_HOST: '0.0.0.0',
      LOG_ARCHIVE: 'off',
      SANDSTREAM_CACHE_DIR: cacheDir,
      REDIS_URL: testRedisUrl(),
      SANDBOX_TYPE: 'inprocess',
      SANDSTREAM_SKIP_BOOTSTRAP: '1',
    });
    try {
      await vi
        .waitUntil(() => /✓ api ready|✗/.test(output()) || child.exitCode !== null, {
          timeout: 180_000,
          interval: 200,
        })
        .catch(() => undefined);
      expect(output()).toMatch(
        new RegExp(
          `api: a port was taken before it listened \\(api failed to start: .*EADDRINUSE.*${apiPort}.*\\); starting it again`,
        ),
      );
      const ready = /✓ api ready .*HTTP API and web console http:\/\/127\.0\.0\.1:(\d+)/.exec(output());
      expect(ready?.[1]).toBeDefined();
      expect(Number(ready?.[1])).not.toBe(apiPort);
      expect(output()).not.toContain('✗');
      expect((await fetch(`http://127.0.0.1:${ready?.[1]}/v1/jobs?limit=1`)).status).toBe(200);
      // Its log is in the run's cache directory, not the checkout's.
      expect(readFileSync(join(cacheDir, 'start-logs', 'api.log'), 'utf8')).toContain('EADDRINUSE');
    } finally {
      child.kill('SIGINT');
      await exited;
      squatter.close();
      rmSync(cacheDir, { recursive: true, force: true });
    }
  }, 240_000);

  it('without REDIS_URL and NATS_URL runs its own Redis and NATS (log archive on) that the CLI finds with no flags, and gives each process its own metrics port', async () => {
    const home = mkdtempSync(join(tmpdir(), 'sandstream-start-'));
    const cacheDir = join(home, '.cache');
    const namespace = uniqueNamespace('start-own');
    const metricsBase = await freePort();
    const {
      REDIS_URL: _ignored,
      SANDSTREAM_NAMESPACE: _alsoIgnored,
      NATS_URL: _noNats,
      LOG_ARCHIVE: _noArchiveSetting,
      ...env
    } = process.env;
    // `npm start --no-job` as typed (no `--`): npm keeps the flag and passes npm_config_job=''.
    const { child, output, exited } = spawnStartScript(
      ['--namespace', namespace, '--scale', 'dispatcher=2'],
      {
        ...env,
        npm_config_job: '',
        SANDSTREAM_CACHE_DIR: cacheDir,
        SANDSTREAM_METRICS_PORT: String(metricsBase),
        API_PORT: String(await freePort()),
        SANDBOX_TYPE: 'inprocess',
        SANDSTREAM_SKIP_BOOTSTRAP: '1',
      },
    );
    try {
      await expect.poll(output, { timeout: 120_000 }).toContain('press Ctrl-C');
      expect(output()).toContain('npm took --no-job as its own option; honoured, but write it after --');
      expect(output()).not.toContain('$ sandstream submit');
      const port = Number(/Redis: embedded, 127\.0\.0\.1:(\d+)/.exec(output())?.[1]);
      expect(port).toBeGreaterThan(0);

      // local.json: the URL with the admin credentials, for its owner's eyes only.
      const file = join(cacheDir, 'sandstream', 'local.json');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      const local = JSON.parse(readFileSync(file, 'utf8')) as {
        redisUrl: string;
        namespace: string;
        natsUrl: string;
      };
      expect(local.namespace).toBe(namespace);
      const natsPort = Number(/NATS: embedded, 127\.0\.0\.1:(\d+)/.exec(output())?.[1]);
      expect(local.natsUrl).toBe(`nats://127.0.0.1:${natsPort}`);

      // No way in without the password; AOF on, fsynced every second.
      const anonymous = new Redis({
        port,
        lazyConnect: true,
        enableReadyCheck: false,
        retryStrategy: () => null,
      });
      anonymous.on('error', () => {});
      await anonymous.connect();
      await expect(anonymous.ping()).rejects.toThrow(/NOAUTH/);
      anonymous.disconnect();
      const admin = new Redis(local.redisUrl);
      expect(await admin.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await admin.config('GET', 'appendfsync')).toEqual(['appendfsync', 'everysec']);
      admin.disconnect();

      // One metrics port per process, each serving Prometheus text.
      const ports = [...output().matchAll(/ready \(pid \d+, health :\d+, metrics :(\d+)[,)]/g)].map((m) =>
        Number(m[1]),
      );
      expect(ports).toHaveLength(6);
      expect(new Set(ports).size).toBe(6);
      for (const p of ports) {
        const res = await fetch(`http://127.0.0.1:${p}/metrics`);
        expect(res.status).toBe(200);
      }

      // The README's "Using it" command, with no flag and no REDIS_URL: found through local.json.
      const cli = spawnSync(
        process.execPath,
        [
          join(repoRoot, 'libs/client/bin/sandstream.mjs'),
          'submit',
          join(repoRoot, 'examples/hello.yaml'),
          '--follow',
        ],
        { cwd: home, env, encoding: 'utf8', timeout: 120_000 },
      );
      expect(cli.stderr + cli.stdout).toContain('hello from sandstream');
      expect(cli.status).toBe(0);

      // The reaper archived the job's output into the embedded NATS, through to its final message.
      const nats = await connectNats({ servers: local.natsUrl });
      try {
        const jsm = await nats.jetstreamManager();
        const stream = logArchiveNames({ namespace }).stream;
        await expect
          .poll(
            async () => {
              const info = await jsm.streams.info(stream, { subjects_filter: '>' }).catch(() => undefined);
              const subjects = Object.keys(info?.state.subjects ?? {});
              const last = await Promise.all(
                subjects.map((s) => jsm.streams.getMessage(stream, { last_by_subj: s })),
              );
              return last.some((m) => m.header.get('Sandstream-Complete') === '1');
            },
            { timeout: 60_000, interval: 500 },
          )
          .toBe(true);
      } finally {
        await nats.close();
      }
    } finally {
      child.kill('SIGINT');
    }
    expect(await exited).toBe(0);
    expect(output()).toContain('  embedded NATS: exited 0');
    expect(output()).toContain('  embedded Redis: exited 0');
    expect(existsSync(join(cacheDir, 'sandstream', 'local.json'))).toBe(false);
    rmSync(home, { recursive: true, force: true });
  }, 300_000);

  // Issue 27: the embedded Redis keeps its `default` user off; with `user default off` alone,
  // Redis 7.0 dropped every transaction of its AOF on restart and the second run knew no job.
  it("twice around a Ctrl-C: the second run still knows the first run's job (status and ls)", async () => {
    const home = mkdtempSync(join(tmpdir(), 'sandstream-start-twice-'));
    const cacheDir = join(home, '.cache');
    const namespace = uniqueNamespace('start-twice');
    const {
      REDIS_URL: _ignored,
      SANDSTREAM_NAMESPACE: _alsoIgnored,
      NATS_URL: _noNats,
      ...env
    } = process.env;
    const run = async (extra: string[]) => {
      const { child, output, exited } = spawnStartScript(['--namespace', namespace, ...extra], {
        ...env,
        SANDSTREAM_CACHE_DIR: cacheDir,
        API_PORT: String(await freePort()),
        SANDBOX_TYPE: 'inprocess',
        SANDSTREAM_SKIP_BOOTSTRAP: '1',
        LOG_ARCHIVE: 'off',
      });
      await expect.poll(output, { timeout: 120_000 }).toContain('press Ctrl-C');
      return {
        output,
        stop: async () => {
          child.kill('SIGINT');
          return exited;
        },
      };
    };
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [join(repoRoot, 'libs/client/bin/sandstream.mjs'), ...args], {
        cwd: home,
        env,
        encoding: 'utf8',
        timeout: 60_000,
      });
    try {
      // The demo job, to its end; then Ctrl-C.
      const first = await run([]);
      expect(first.output()).toMatch(/job finished \(sandstream exit code 0\)/);
      const jobId = /submitted (\S+)/.exec(first.output())?.[1] ?? '';
      expect(jobId).not.toBe('');
      expect(await first.stop()).toBe(0);
      expect(first.output()).toContain('  embedded Redis: exited 0');

      const second = await run(['--no-job']);
      try {
        const status = cli('status', jobId);
        expect(status.stderr + status.stdout).toContain('succeeded');
        expect(status.status).toBe(0);
        const listed = cli('ls');
        expect(listed.stdout).toContain(jobId);
        expect(listed.status).toBe(0);
      } finally {
        expect(await second.stop()).toBe(0);
      }
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  }, 300_000);
});
