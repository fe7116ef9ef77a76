import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyTestSandbox, dockerEngine, testRedisUrl } from '@sandstream/test-support';
import { SCHEMA_VERSION, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SandboxBackend, type SandboxRef, SandboxStartError } from '../backend.js';
import { createBackend } from '../create-backend.js';
import type { SandboxSpec } from '../sandbox-spec.js';
import { TemplateRegistry } from '../templates/template-registry.js';
import { dockerLeftovers, testImages } from '../testing/docker-test-env.js';
import { StepChannel } from '../testing/step-channel.js';

// §3 and §4 of the isolation issue, checked on real containers: the operator's resource policy
// reaches the engine, the pids limit stops a fork flood, and the read-only root / non-root user
// template keys hold from inside the sandbox.
const redisUrl = testRedisUrl();
const { docker, skip } = await dockerEngine('docker-isolation');
const tag = randomBytes(3).toString('hex');
const MiB = 1024 ** 2;

describe.skipIf(skip)('DockerBackend: resource policy and container defaults', () => {
  let redis: Redis;
  let blocking: Redis;
  let backend: SandboxBackend;
  let registry: TemplateRegistry;
  const dir = mkdtempSync(join(tmpdir(), 'sandstream-isolation-'));
  const refs: SandboxRef[] = [];

  beforeAll(async () => {
    redis = new Redis(redisUrl);
    blocking = redis.duplicate();
    // Through the environment, as pod-lifecycle configures it (small values keep the test quick).
    ({ backend } = await createBackend({
      redis,
      docker,
      env: {
        SANDBOX_TYPE: 'docker',
        SANDSTREAM_AGENT_CARRIER_IMAGE: testImages.carrier,
        // The shared test Redis: loopback only, open `default` user (isolation: docker-reach.test.ts).
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDBOX_DEFAULT_CPU: '500m',
        SANDBOX_DEFAULT_MEMORY: '256Mi',
        SANDBOX_DEFAULT_PIDS: '64',
        SANDBOX_MAX_CPU: '1',
        SANDBOX_MAX_MEMORY: '512Mi',
        SANDBOX_MAX_PIDS: '256',
      },
    }));
    const file = join(dir, 'templates.yaml');
    writeFileSync(
      file,
      [
        'templates:',
        '  plain: { image: sandstream/busybox:static }',
        '  bigger: { image: sandstream/busybox:static, resources: { limits: { memory: 512Mi, pids: 256 } } }',
        '  too-big: { image: sandstream/busybox:static, resources: { limits: { memory: 1Gi } } }',
        '  locked: { image: sandstream/busybox:static, readOnlyRootFilesystem: true, user: "1000:1000" }',
      ].join('\n'),
    );
    registry = await TemplateRegistry.open({ path: file, watch: false });
  });
  afterAll(async () => {
    for (const ref of refs) await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
    registry?.close();
    rmSync(dir, { recursive: true, force: true });
    blocking?.disconnect();
    redis?.disconnect();
  });

  const start = async (jobId: string, spec: SandboxSpec) => {
    const ref = await backend.create({
      jobId,
      tenant: 'tenant-a',
      spec: { ...spec, image: testImages.busybox },
      agent: { redisUrl, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
    });
    refs.push(ref);
    await backend.waitReady(ref, 30_000, {
      isAgentAlive: async () => (await redis.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1,
    });
    return { ref, steps: new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged')) };
  };
  const sh = (steps: StepChannel, stepId: string, script: string) =>
    steps.run({ schemaVersion: SCHEMA_VERSION, stepId, kind: 'run', command: 'sh', args: ['-c', script] });

  it('gives a spec without limits the operator defaults, swap equal to memory, and a pids limit that stops a fork flood', async () => {
    const { ref, steps } = await start(`iso-default-${tag}`, registry.resolve({ template: 'plain' }));
    const info = await docker.getContainer(ref.id).inspect();
    expect(info.HostConfig).toMatchObject({
      NanoCpus: 5e8,
      Memory: 256 * MiB,
      MemorySwap: 256 * MiB,
      PidsLimit: 64,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
    });
    // By default the image's own user (root here) runs on a writable root: package managers work.
    const root = await sh(steps, 'root', 'id -u && touch /usr/installed && echo wrote');
    expect(await steps.stdout('root')).toEqual(['0', 'wrote']);
    expect(root.exitCode).toBe(0);
    // 300 background processes: the shell cannot fork past the limit and gives up.
    const flood = await sh(
      steps,
      'flood',
      'i=0; while [ $i -lt 300 ]; do sleep 20 & i=$((i+1)); done; echo all-started',
    );
    expect(flood.exitCode).not.toBe(0);
    expect(await steps.stdout('flood')).not.toContain('all-started');
  }, 60_000);

  it('lets a template raise the limits within the maximum and refuses one beyond it, naming field and limit', async () => {
    const jobId = `iso-bigger-${tag}`;
    const { ref } = await start(jobId, registry.resolve({ template: 'bigger' }));
    const info = await docker.getContainer(ref.id).inspect();
    expect(info.HostConfig).toMatchObject({ Memory: 512 * MiB, MemorySwap: 512 * MiB, PidsLimit: 256 });

    const refusedJob = `iso-too-big-${tag}`;
    const refused = start(refusedJob, registry.resolve({ template: 'too-big' }));
    await expect(refused).rejects.toBeInstanceOf(SandboxStartError);
    await expect(refused).rejects.toMatchObject({
      reason: 'resource_limit',
      message: 'resources.limits.memory "1Gi" is above the operator maximum 512Mi (SANDBOX_MAX_MEMORY)',
    });
    expect(await dockerLeftovers(docker, refusedJob)).toEqual([]);
  }, 60_000);

  it('runs a read-only root as a non-root user with /tmp and the workspace writable', async () => {
    const { ref, steps } = await start(`iso-locked-${tag}`, registry.resolve({ template: 'locked' }));
    const info = await docker.getContainer(ref.id).inspect();
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    const id = await sh(steps, 'id', 'id -u');
    expect(id.exitCode).toBe(0);
    expect(await steps.stdout('id')).toEqual(['1000']);
    const root = await sh(steps, 'root', 'touch /etc/x');
    expect(root.exitCode).not.toBe(0);
    const tmp = await sh(steps, 'tmp', 'echo ok > /tmp/x && cat /tmp/x');
    expect(tmp.exitCode).toBe(0);
    const written = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'work',
      kind: 'writeFile',
      path: 'kept.txt',
      content: 'mine',
    });
    expect(written.errorMessage).toBeNull();
  }, 60_000);
});
