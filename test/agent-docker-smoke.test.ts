/**
 * seeds/000 "Smoke 2" on the local Docker engine: the carrier image injects the agent into a named
 * volume, then the agent runs from that volume inside UNMODIFIED images — a minimal Debian (glibc)
 * and a busybox-only image with no libc at all — and completes steps against the real Redis.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { containerLogs, dockerEngine, findCarrierImage } from '@sandstream/test-support';
import { decodeEventEntry, StepResultSchema, sandboxKeys } from '@sandstream/wire';
import type Docker from 'dockerode';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

const run = promisify(execFile);
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
// The tag is shared by every checkout on the machine: one testing its own agent names its own.
const CARRIER =
  process.env.SANDSTREAM_AGENT_CARRIER_IMAGE ?? findCarrierImage() ?? 'sandstream/agent-carrier:dev';
const REDIS_URL = process.env.SMOKE_REDIS_URL ?? 'redis://127.0.0.1:6379';
const LAUNCH = [
  '/shared/lib/ld-linux-x86-64.so.2',
  '--library-path',
  '/shared/lib',
  '/shared/sandstream-agent',
];

const gate = await dockerEngine('agent-docker-smoke');
const suffix = randomBytes(4).toString('hex');
const volumeName = `sandstream-smoke-shared-${suffix}`;
const label = { 'sandstream.test': `agent-docker-smoke-${suffix}` };

async function runToExit(
  docker: Docker,
  options: Docker.ContainerCreateOptions,
  timeoutMs: number,
): Promise<{ exitCode: number; logs: string }> {
  const container = await docker.createContainer({ ...options, Labels: label });
  try {
    await container.start();
    const waited = await Promise.race([
      container.wait() as Promise<{ StatusCode: number }>,
      new Promise<never>((_, reject) =>
        setTimeout(
          () => reject(new Error(`container did not exit within ${timeoutMs} ms`)),
          timeoutMs,
        ).unref(),
      ),
    ]);
    return { exitCode: waited.StatusCode, logs: await containerLogs(container) };
  } finally {
    await container.remove({ force: true }).catch(() => {});
  }
}

describe.skipIf(gate.skip)('agent injected into unmodified images (Docker)', () => {
  const { docker } = gate;
  let redis: Redis;

  beforeAll(async () => {
    const binary = `${repoRoot}agent/dist/sandstream-agent`;
    if (!existsSync(binary)) throw new Error(`${binary} is missing: run "npm run build" first`);
    // Idempotent: skips images that exist and rebuilds the carrier only when the agent changed.
    await run('bash', [`${repoRoot}scripts/images/build-all.sh`], {
      cwd: repoRoot,
      env: { ...process.env, CARRIER_IMAGE: CARRIER },
    });
    redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 2 });
    await redis.connect();
    await docker.createVolume({ Name: volumeName, Labels: label });
    // The init-container half: the carrier's default command is `--inject /shared`.
    const inject = await runToExit(
      docker,
      { Image: CARRIER, HostConfig: { Binds: [`${volumeName}:/shared`] } },
      60_000,
    );
    expect(inject, inject.logs).toMatchObject({ exitCode: 0 });
  }, 600_000);

  afterAll(async () => {
    await redis?.quit();
    const leftovers = await docker.listContainers({
      all: true,
      filters: { label: [`sandstream.test=${label['sandstream.test']}`] },
    });
    for (const c of leftovers) await docker.getContainer(c.Id).remove({ force: true });
    await docker
      .getVolume(volumeName)
      .remove()
      .catch(() => {});
  });

  it('uses a busybox image that really has no libc and no dynamic loader of its own', async () => {
    const probe = await runToExit(
      docker,
      {
        Image: 'sandstream/busybox:static',
        Cmd: [
          'find',
          '/',
          '-xdev',
          '(',
          '-name',
          'libc.so*',
          '-o',
          '-name',
          'ld-linux*',
          '-o',
          '-name',
          'ld-musl*',
          ')',
        ],
      },
      60_000,
    );
    expect(probe).toEqual({ exitCode: 0, logs: '' });
  });

  const cases = [
    // Debian runs as root; busybox as nobody, to show a non-root sandbox can run the injected files.
    {
      image: 'sandstream/debian:bookworm',
      user: '0:0',
      libc: /\/(usr\/)?lib\/x86_64-linux-gnu\/libc\.so\.6/,
    },
    { image: 'sandstream/busybox:static', user: '65534:65534', libc: null },
  ];

  it.each(cases)(
    'runs steps inside unmodified $image and exits 0 on shutdown',
    async ({ image, user, libc }) => {
      const jobId = `smoke-docker-${image.replace(/[^a-z]/g, '')}-${suffix}`;
      const keys = sandboxKeys(jobId);
      try {
        const steps = [
          { schemaVersion: 1, stepId: 'hello', kind: 'run', command: 'echo', args: ['hello from', image] },
          // The step's own process must map the image's libc (or none), never /shared/lib.
          { schemaVersion: 1, stepId: 'maps', kind: 'run', command: 'cat', args: ['/proc/self/maps'] },
          { schemaVersion: 1, stepId: 'env', kind: 'run', command: 'env' },
          // Started by the static native spawner from /shared/lib, not forked by the agent.
          { schemaVersion: 1, stepId: 'parent', kind: 'run', command: 'cat /proc/$PPID/comm', shell: true },
          {
            schemaVersion: 1,
            stepId: 'write',
            kind: 'writeFile',
            path: 'smoke/note.txt',
            content: `note ${jobId}\n`,
          },
          { schemaVersion: 1, stepId: 'read', kind: 'readFile', path: 'smoke/note.txt' },
          { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' },
        ];
        // Queued before the agent starts: the list is FIFO, the agent drains it in order.
        for (const step of steps) await redis.lpush(keys.in, JSON.stringify(step));

        const agent = await runToExit(
          docker,
          {
            Image: image,
            User: user,
            Cmd: [...LAUNCH, '--redis-url', REDIS_URL, '--job-id', jobId, '--workdir', '/tmp', '--verbose'],
            WorkingDir: '/tmp',
            HostConfig: { NetworkMode: 'host', Binds: [`${volumeName}:/shared:ro`] },
          },
          90_000,
        );
        expect(agent, agent.logs).toMatchObject({ exitCode: 0 });

        const results = (await redis.lrange(keys.results, 0, -1)).map((r) =>
          StepResultSchema.parse(JSON.parse(r)),
        );
        const byId = new Map(results.map((r) => [r.stepId, r]));
        expect([...byId.keys()].sort()).toEqual(steps.map((s) => s.stepId).sort());
        for (const r of results)
          expect(r, JSON.stringify(r)).toMatchObject({ exitCode: 0, errorMessage: null });
        expect(byId.get('read')?.output).toMatchObject({ kind: 'readFile', content: `note ${jobId}\n` });

        const lines = new Map<string, string[]>();
        // One entry may hold several events (a quick step's whole output): read them all.
        for (const [, fields] of await redis.xrange(keys.events, '-', '+')) {
          for (const event of decodeEventEntry(fields))
            if (event.kind === 'stdout' && event.line !== undefined)
              lines.set(event.stepId, [...(lines.get(event.stepId) ?? []), event.line]);
        }
        expect(lines.get('hello')).toEqual([`hello from ${image}`]);
        const maps = (lines.get('maps') ?? []).join('\n');
        expect(maps).not.toContain('/shared/');
        if (libc) expect(maps).toMatch(libc);
        else expect(maps).not.toMatch(/libc/);
        expect(lines.get('env')?.some((l) => l.startsWith('LD_LIBRARY_PATH='))).toBe(false);
        // The kernel keeps 15 characters of a command name.
        expect(lines.get('parent')).toEqual(['sandstream-spaw']);
      } finally {
        await redis.unlink(keys.in, keys.events, keys.results, keys.heartbeat, keys.control);
      }
    },
  );

  it('stops cleanly on docker stop: SIGTERM reaches the agent as PID 1 through the loader, exit 0', async () => {
    const jobId = `smoke-docker-stop-${suffix}`;
    const keys = sandboxKeys(jobId);
    const container = await docker.createContainer({
      Image: 'sandstream/busybox:static',
      Cmd: [...LAUNCH, '--redis-url', REDIS_URL, '--job-id', jobId, '--workdir', '/tmp'],
      Labels: label,
      HostConfig: { NetworkMode: 'host', Binds: [`${volumeName}:/shared:ro`] },
    });
    try {
      await container.start();
      await vi
        .waitUntil(async () => (await redis.exists(keys.heartbeat)) === 1, { timeout: 60_000, interval: 50 })
        .catch(async () => {
          throw new Error(`no heartbeat: ${await containerLogs(container)}`);
        });
      const started = Date.now();
      // t=20: without a SIGTERM handler in PID 1 the engine would wait all of it, then SIGKILL (137).
      await container.stop({ t: 20 });
      const stopMs = Date.now() - started;
      const state = (await container.inspect()).State;
      expect(state.ExitCode, await containerLogs(container)).toBe(0);
      expect(stopMs).toBeLessThan(10_000);
      expect(await redis.exists(keys.heartbeat)).toBe(0);
    } finally {
      await container.remove({ force: true }).catch(() => {});
      await redis.unlink(keys.in, keys.events, keys.results, keys.heartbeat, keys.control);
    }
  });
});
