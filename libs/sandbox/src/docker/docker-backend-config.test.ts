import { randomBytes } from 'node:crypto';
import {
  destroyTestSandbox,
  dockerEngine,
  type RedisServer,
  startRedisServer,
  testRedisUrl,
} from '@sandstream/test-support';
import { SCHEMA_VERSION, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxLabels, type SandboxRef, SandboxStartError } from '../backend.js';
import { createBackend } from '../create-backend.js';
import { type SandboxSpecInput, SandboxSpecSchema } from '../sandbox-spec.js';
import { dockerLeftovers, testImages } from '../testing/docker-test-env.js';
import { StepChannel } from '../testing/step-channel.js';
import { DockerBackend } from './docker-backend.js';
import { persistentVolumeName } from './docker-names.js';

const redisUrl = testRedisUrl();
const { docker, skip } = await dockerEngine('docker-backend-config');
const tag = randomBytes(3).toString('hex');
// The shared test Redis listens on loopback with an open `default` user: these suites test
// other things, so they take the development settings (isolation: docker-reach.test.ts).
const devNetwork = { defaultNetwork: 'host', allowOpenRedis: true } as const;

describe.skipIf(skip)('DockerBackend: what the container is made of', () => {
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
      carrierImage: testImages.carrier,
      defaultGraceMs: 2000,
      ...devNetwork,
    });
  });
  afterAll(async () => {
    for (const ref of refs) await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
    blocking.disconnect();
    redis.disconnect();
  });

  const request = (jobId: string, spec: SandboxSpecInput, agentRedisUrl = redisUrl) => ({
    jobId,
    tenant: 'tenant-a',
    spec: SandboxSpecSchema.parse(spec),
    agent: { redisUrl: agentRedisUrl, keyStyle: 'tagged' as const, heartbeatIntervalMs: 200 },
  });
  const alive = (r: Redis, jobId: string) => async () =>
    (await r.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1;

  it('runs a non-root, capability-less, resource-limited container with the job labels', async () => {
    const jobId = `cfg-user-${tag}`;
    const ref = await backend.create(
      request(jobId, {
        image: testImages.busybox,
        user: '1000:1000',
        resources: { limits: { cpu: '500m', memory: '256Mi' }, requests: { memory: '64Mi' } },
        labels: { team: 'blue' },
      }),
    );
    refs.push(ref);
    await backend.waitReady(ref, 30_000, { isAgentAlive: alive(redis, jobId) });
    const info = await docker.getContainer(ref.id).inspect();
    expect(info.Config.User).toBe('1000:1000');
    expect(info.Config.Labels).toMatchObject({
      [SandboxLabels.jobId]: jobId,
      [SandboxLabels.tenant]: 'tenant-a',
      [SandboxLabels.managedBy]: 'sandstream',
      team: 'blue',
    });
    expect(info.HostConfig).toMatchObject({
      NanoCpus: 5e8,
      Memory: 256 * 1024 * 1024,
      MemoryReservation: 64 * 1024 * 1024,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      NetworkMode: 'host',
    });
    expect(info.Mounts.find((m) => m.Destination === '/shared')).toMatchObject({ RW: false });

    // The non-root agent can write its work tree (a volume handed to its uid) and runs as that uid.
    const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
    const written = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'w',
      kind: 'writeFile',
      path: 'x.txt',
      content: 'ok',
    });
    expect(written.errorMessage).toBeNull();
    const id = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'id',
      kind: 'run',
      command: 'id',
      args: ['-u'],
    });
    expect(id.exitCode).toBe(0);
    expect(await steps.stdout('id')).toEqual(['1000']);
    await destroyTestSandbox(redis, backend, ref, 2000);
    expect(await dockerLeftovers(docker, jobId)).toEqual([]);
  });

  it('lets a non-root sandbox write a persistent workspace', async () => {
    const jobId = `cfg-ws-user-${tag}`;
    const name = `cfg-ws-${tag}`;
    const ref = await backend.create(
      request(jobId, { image: testImages.busybox, user: '1000:1000', persistentWorkspace: { name } }),
    );
    refs.push(ref);
    try {
      await backend.waitReady(ref, 30_000, { isAgentAlive: alive(redis, jobId) });
      const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
      const written = await steps.run({
        schemaVersion: SCHEMA_VERSION,
        stepId: 'w',
        kind: 'writeFile',
        path: 'kept.txt',
        content: 'mine',
      });
      expect(written.errorMessage).toBeNull();
      const ls = await steps.run({
        schemaVersion: SCHEMA_VERSION,
        stepId: 'ls',
        kind: 'run',
        command: 'ls',
        args: ['-ldn', '/work'],
      });
      expect(ls.exitCode).toBe(0);
      expect((await steps.stdout('ls'))[0]).toMatch(/^drwxr-x---\s+\d+\s+1000\s+1000\s/);
    } finally {
      await destroyTestSandbox(redis, backend, ref, 2000);
      await docker
        .getVolume(persistentVolumeName(name))
        .remove()
        .catch(() => {});
    }
  });

  it('hands spec.runtimeClass to the engine as the container runtime', async () => {
    const jobId = `cfg-runtime-${tag}`;
    const err = await backend
      .create(request(jobId, { image: testImages.busybox, runtimeClass: 'sandstream-no-such-runtime' }))
      .catch((e: unknown) => e);
    // This engine has no such runtime: the engine's refusal naming it proves the field reached it.
    expect(err).toBeInstanceOf(SandboxStartError);
    expect((err as SandboxStartError).reason).toBe('backend_error');
    expect((err as Error).message).toMatch(/sandstream-no-such-runtime/);
    expect(await dockerLeftovers(docker, jobId)).toEqual([]);
  });

  it('refuses network "none" and an unconfigured "deny-egress" with the reason', async () => {
    await expect(
      backend.create(request(`cfg-none-${tag}`, { image: testImages.busybox, network: 'none' })),
    ).rejects.toThrow(/network "none" leaves the agent no way to reach Redis/);
    // On the host network nothing can confine a sandbox: only `internet` starts there.
    await expect(
      backend.create(request(`cfg-deny-${tag}`, { image: testImages.busybox, network: 'deny-egress' })),
    ).rejects.toThrow(/share the host's network and no rule can confine them/);
    // Without egress rules `none` needs the internal network, and an allow-list cannot start at all.
    const unruled = new DockerBackend({
      docker,
      redis,
      carrierImage: testImages.carrier,
      ...devNetwork,
      egress: 'off',
    });
    await expect(
      unruled.create(request(`cfg-deny-${tag}`, { image: testImages.busybox, network: 'deny-egress' })),
    ).rejects.toThrow(/or, with them off, the backend option denyEgress/);
    await expect(
      unruled.create(
        request(`cfg-allow-${tag}`, {
          image: testImages.busybox,
          network: { egress: { allow: ['10.0.0.0/8'] } },
        }),
      ),
    ).rejects.toThrow(/needs the Docker egress rules \(SANDSTREAM_DOCKER_EGRESS=iptables/);
  });

  describe('deny-egress without egress rules (egress: off)', () => {
    const network = `sandstream-test-deny-${tag}`;
    let server: RedisServer | undefined;
    let gatewayRedis: Redis | undefined;
    let gatewayBlocking: Redis | undefined;
    let denyBackend: DockerBackend;
    let gatewayUrl = '';

    beforeAll(async () => {
      // The internal network is made by a first backend call; its gateway is the host's only
      // address the sandbox can reach, so a Redis bound there plays "Redis attached to the network".
      await docker.createNetwork({
        Name: network,
        Internal: true,
        Labels: { [SandboxLabels.managedBy]: 'sandstream' },
      });
      const info = (await docker.getNetwork(network).inspect()) as {
        IPAM: { Config: { Gateway: string }[] };
      };
      const gateway = info.IPAM.Config[0]?.Gateway as string;
      server = await startRedisServer({ host: gateway, args: ['--protected-mode', 'no'] });
      gatewayUrl = server.url;
      gatewayRedis = new Redis(gatewayUrl, { retryStrategy: (n) => (n > 50 ? null : 100) });
      gatewayRedis.on('error', () => {});
      await gatewayRedis.ping();
      gatewayBlocking = gatewayRedis.duplicate();
      denyBackend = new DockerBackend({
        docker,
        redis: gatewayRedis,
        carrierImage: testImages.carrier,
        denyEgress: { network, redisUrl: gatewayUrl },
        allowOpenRedis: true,
        // The internal network is the way `none` is kept when the host firewall is not ours.
        egress: 'off',
      });
    });
    afterAll(async () => {
      // A sandbox a failed test left attached would keep the network from being removed.
      for (const ref of refs) await denyBackend?.destroy(ref, { graceMs: 0 }).catch(() => {});
      gatewayBlocking?.disconnect();
      gatewayRedis?.disconnect();
      await server?.stop();
      await docker
        .getNetwork(network)
        .remove()
        .catch(() => {});
    });

    it('attaches the sandbox to the internal network, drives it through the Redis there, and blocks traffic off that network', async () => {
      const jobId = `cfg-egress-${tag}`;
      const ref = await denyBackend.create(
        request(jobId, { image: testImages.busybox, network: 'deny-egress' }, 'redis://127.0.0.1:1'),
      );
      refs.push(ref);
      const redisThere = gatewayRedis as Redis;
      await denyBackend.waitReady(ref, 30_000, { isAgentAlive: alive(redisThere, jobId) });
      const info = await docker.getContainer(ref.id).inspect();
      expect(info.HostConfig.NetworkMode).toBe(network);
      expect(((await docker.getNetwork(network).inspect()) as { Internal: boolean }).Internal).toBe(true);

      // A listener on the default bridge: reachable from an ordinary container (the control),
      // not from the sandbox, whose packets the engine drops at the edge of the internal network.
      const listener = await docker.createContainer({
        name: `sandstream-test-listener-${tag}`,
        Image: testImages.busybox,
        Cmd: ['sh', '-c', 'while true; do echo hi | nc -l -p 8080; done'],
        Labels: { [SandboxLabels.managedBy]: 'sandstream-test' },
      });
      try {
        await listener.start();
        const ip = (await listener.inspect()).NetworkSettings.IPAddress;
        const control = await docker.createContainer({
          Image: testImages.busybox,
          Cmd: ['nc', '-w', '2', ip, '8080'],
          HostConfig: { AutoRemove: false },
        });
        await control.start();
        expect(((await control.wait()) as { StatusCode: number }).StatusCode).toBe(0);
        await control.remove({ force: true });

        const steps = new StepChannel(redisThere, gatewayBlocking as Redis, sandboxKeys(jobId, 'tagged'));
        const probe = await steps.run({
          schemaVersion: SCHEMA_VERSION,
          stepId: 'egress',
          kind: 'run',
          command: 'nc',
          args: ['-w', '2', ip, '8080'],
        });
        expect(probe.exitCode).not.toBe(0);
        expect(await steps.stdout('egress')).not.toContain('hi');
      } finally {
        await listener.remove({ force: true });
      }
      await denyBackend.destroy(ref, { graceMs: 2000 }); // its keys go with the private server
      expect(await dockerLeftovers(docker, jobId)).toEqual([]);
    });
  });

  it('reaches the engine named by DOCKER_HOST when no client is injected', async () => {
    const saved = process.env.DOCKER_HOST;
    try {
      process.env.DOCKER_HOST = `unix:///tmp/sandstream-no-engine-${tag}.sock`;
      const missing = await createBackend({ redis, env: process.env });
      expect(missing.detection.reason).toMatch(/DOCKER_HOST=unix:\/\/\/tmp\/sandstream-no-engine/);
      await expect(missing.backend.list()).rejects.toThrow(/sandstream-no-engine/);

      process.env.DOCKER_HOST = 'unix:///var/run/docker.sock';
      const real = await createBackend({ redis, env: process.env });
      expect(Array.isArray(await real.backend.list())).toBe(true);
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
    }
  });
});
