import { randomBytes } from 'node:crypto';
import { destroyTestSandbox, dockerEngine, testRedisUrl } from '@sandstream/test-support';
import { SCHEMA_VERSION, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxRef, SandboxStartError } from '../backend.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { registerBackendSuite } from '../testing/backend-suite.js';
import { dockerLeftovers, testImages } from '../testing/docker-test-env.js';
import { StepChannel } from '../testing/step-channel.js';
import { DockerBackend } from './docker-backend.js';
import { persistentVolumeName } from './docker-names.js';

/** The shared test Redis: loopback only, open `default` user (isolation: test/e2e/docker-reach.test.ts). */
const devNetwork = { defaultNetwork: 'host', allowOpenRedis: true } as const;

// gVisor for real: `runtimeClass: gvisor` sandboxes on an engine with runsc registered (npm test's
// bootstrap installs and registers it as root). Outside CI an engine without runsc skips these
// with the reason; under CI=true they run and fail, because CI must not pass by skipping.
const redisUrl = testRedisUrl();
const engine = await dockerEngine('docker-gvisor');
const { docker } = engine;
let skip = engine.skip;
if (!skip && process.env.CI !== 'true') {
  const info = (await docker.info()) as { Runtimes?: Record<string, unknown> };
  if (!info.Runtimes?.runsc) {
    skip = 'the Docker engine has no runsc runtime; as root, `npm test` installs gVisor and registers it';
    process.stderr.write(`\n*** SKIPPING docker-gvisor: ${skip} ***\n\n`);
  }
}
const tag = randomBytes(3).toString('hex');

// The backend contract, every test of it inside gVisor. One image only: the runc suite already
// covers the image variants, and each gVisor start costs a little more.
registerBackendSuite({
  name: `docker under gVisor (${testImages.busybox})`,
  skip,
  redisUrl,
  createBackend: (redis) =>
    new DockerBackend({
      docker,
      redis,
      ...devNetwork,
      carrierImage: testImages.carrier,
      defaultGraceMs: 3000,
    }),
  agent: { heartbeatIntervalMs: 200 },
  spec: { image: testImages.busybox, runtimeClass: 'gvisor' },
  // The pull that finds no such image comes before the runtime plays a part: the runc suite
  // (docker-backend.test.ts) checks it against a registry it starts.
  missingImage: false,
  leftovers: (jobId) => dockerLeftovers(docker, jobId),
  removePersistentWorkspace: async (name) => {
    await docker
      .getVolume(persistentVolumeName(name))
      .remove()
      .catch(() => {});
  },
  testTimeoutMs: 120_000,
});

describe.skipIf(skip)('DockerBackend: runtimeClass gvisor', () => {
  let redis: Redis;
  let blocking: Redis;
  let backend: DockerBackend;
  const refs: SandboxRef[] = [];

  beforeAll(() => {
    redis = new Redis(redisUrl);
    blocking = redis.duplicate();
    backend = new DockerBackend({
      docker,
      redis,
      ...devNetwork,
      carrierImage: testImages.carrier,
      defaultGraceMs: 2000,
    });
  });
  afterAll(async () => {
    for (const ref of refs) await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
    blocking.disconnect();
    redis.disconnect();
  });

  const request = (jobId: string, runtimeClass?: string) => ({
    jobId,
    tenant: 'tenant-a',
    spec: SandboxSpecSchema.parse({ image: testImages.busybox, runtimeClass }),
    agent: { redisUrl, keyStyle: 'tagged' as const, heartbeatIntervalMs: 200 },
  });

  async function start(
    jobId: string,
    runtimeClass?: string,
  ): Promise<{ ref: SandboxRef; steps: StepChannel }> {
    const ref = await backend.create(request(jobId, runtimeClass));
    refs.push(ref);
    await backend.waitReady(ref, 30_000, {
      isAgentAlive: async () => (await redis.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1,
    });
    return { ref, steps: new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged')) };
  }

  async function kernel(steps: StepChannel): Promise<string> {
    const ran = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'uname',
      kind: 'run',
      command: 'uname',
      args: ['-r'],
    });
    expect(ran.exitCode).toBe(0);
    return (await steps.stdout('uname')).join('').trim();
  }

  it('runs every step kind inside gVisor, whose kernel is not the host one runc shows', async () => {
    const jobId = `gvisor-steps-${tag}`;
    // One after the other: a failed first start must not leave the second unrecorded for afterAll.
    const sandbox = await start(jobId, 'gvisor');
    const plain = await start(`gvisor-runc-${tag}`);
    const gvisor = sandbox.steps;
    const runc = plain.steps;
    const info = await docker.getContainer(sandbox.ref.id).inspect();
    expect(info.HostConfig.Runtime).toBe('runsc');

    // gVisor's Sentry reports its own fixed kernel release; runc shows the host's.
    expect(await kernel(gvisor)).toBe('4.4.0');
    expect(await kernel(runc)).not.toBe('4.4.0');

    const v = SCHEMA_VERSION;
    const written = await gvisor.run({
      schemaVersion: v,
      stepId: 'w',
      kind: 'writeFile',
      path: 'dir/a.txt',
      content: 'hello gvisor\n',
    });
    expect(written.errorMessage).toBeNull();
    expect(written.output).toMatchObject({ kind: 'writeFile', bytesWritten: 13 });
    const read = await gvisor.run({ schemaVersion: v, stepId: 'r', kind: 'readFile', path: 'dir/a.txt' });
    expect(read.output).toMatchObject({ kind: 'readFile', content: 'hello gvisor\n' });
    const listed = await gvisor.run({ schemaVersion: v, stepId: 'l', kind: 'listFiles', path: 'dir' });
    expect(listed.output).toMatchObject({
      kind: 'listFiles',
      entries: [expect.objectContaining({ path: 'a.txt', type: 'file' })],
    });
    const grep = await gvisor.run({
      schemaVersion: v,
      stepId: 'g',
      kind: 'grep',
      pattern: 'gvisor',
      path: '.',
    });
    expect(grep.output).toMatchObject({
      kind: 'grep',
      matches: [expect.objectContaining({ path: 'dir/a.txt', line: 1 })],
    });
    const stats = await gvisor.run({ schemaVersion: v, stepId: 's', kind: 'stats' });
    expect(stats.errorMessage).toBeNull();
    expect(stats.output).toMatchObject({ kind: 'stats', workspaceFiles: 1, workspaceBytes: 13 });
    const shell = await gvisor.run({
      schemaVersion: v,
      stepId: 'sh',
      kind: 'shell',
      command: 'cd dir && cat a.txt',
    });
    expect(shell.exitCode).toBe(0);
    expect(await gvisor.stdout('sh')).toEqual(['hello gvisor']);
  }, 90_000);

  it('refuses, before creating anything, a runtimeClass whose runtime the engine lacks, naming the fix', async () => {
    const jobId = `gvisor-missing-${tag}`;
    // The engine under test has runsc; a backend told gVisor is registered under another name
    // meets an engine without it, as a fresh Docker install would.
    const lacking = new DockerBackend({
      docker,
      redis,
      ...devNetwork,
      carrierImage: testImages.carrier,
      runtimes: { gvisor: 'sandstream-no-runsc' },
    });
    const err = await lacking.create(request(jobId, 'gvisor')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxStartError);
    expect((err as Error).message).toMatch(
      /runtimeClass "gvisor" needs the Docker runtime "sandstream-no-runsc", which this engine does not have/,
    );
    expect((err as Error).message).toMatch(/daemon\.json/);
    expect(await dockerLeftovers(docker, jobId)).toEqual([]);
  });
});
