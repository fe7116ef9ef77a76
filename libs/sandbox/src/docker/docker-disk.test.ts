import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { destroyTestSandbox, dockerEngine, testRedisUrl } from '@sandstream/test-support';
import { SCHEMA_VERSION, sandboxKeys } from '@sandstream/wire';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxBackend, SandboxDiskUsage, SandboxRef } from '../backend.js';
import { createBackend } from '../create-backend.js';
import { DiskBudgetWatch, isDiskBudgetReason } from '../disk-budget-watch.js';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { dockerLeftovers, testImages } from '../testing/docker-test-env.js';
import { StepChannel } from '../testing/step-channel.js';
import { DockerDiskMeter, detectStorageQuota } from './docker-disk.js';

// Issue 28, item 1: a Docker sandbox filling its work tree or its own writable layer is stopped
// with reason `disk-budget` a bounded overshoot past its limit, and its bytes leave the host's
// disk when it is destroyed. The engine here is overlay2 on ext4: no storage quota, the watched
// budget is what stops it.
const redisUrl = testRedisUrl();
const { docker, skip } = await dockerEngine('docker-disk');
const tag = randomBytes(3).toString('hex');
const MiB = 1024 ** 2;
const LIMIT = 64 * MiB;
const INTERVAL_MS = 1000;
/**
 * Beyond rate × interval: one measuring walk plus the kill (the filler writes on while they run),
 * and one 4 MiB chunk in flight. Stated in docs/sandbox-backends.md, "Disk".
 */
const SLACK = 24 * MiB;

// Throttled so the test writes ~100 MB per case, not gigabytes: 4 MiB chunks, a pause between.
const filler = (dir: string) =>
  `mkdir -p ${dir}; i=0; while true; do dd if=/dev/zero of=${dir}/fill-$i bs=1M count=4 2>/dev/null; i=$((i+1)); sleep 0.1; done`;

// gVisor keeps /tmp in a tmpfs of its own (memory, bounded by the memory limit): its layer
// filler writes elsewhere on the root. Run where the engine has runsc.
const gvisor =
  !skip &&
  (await docker
    .info()
    .then((i: { Runtimes?: Record<string, unknown> }) => Boolean(i.Runtimes?.runsc))
    .catch(() => false));

describe.skipIf(skip)('DockerBackend: disk budget', () => {
  let redis: Redis;
  let blocking: Redis;
  let backend: SandboxBackend;
  let dataRoot: string;
  const refs: SandboxRef[] = [];

  beforeAll(async () => {
    redis = new Redis(redisUrl);
    blocking = redis.duplicate();
    ({ backend } = await createBackend({
      redis,
      docker,
      env: {
        SANDBOX_TYPE: 'docker',
        SANDSTREAM_AGENT_CARRIER_IMAGE: testImages.carrier,
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDBOX_DEFAULT_DISK: '64Mi',
      },
    }));
    dataRoot = ((await docker.info()) as { DockerRootDir: string }).DockerRootDir;
  });
  afterAll(async () => {
    for (const ref of refs) await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
    blocking?.disconnect();
    redis?.disconnect();
  });

  const freeBytes = async () => {
    const s = await statfs(dataRoot);
    return s.bavail * s.bsize;
  };

  const fillUntilStopped = async (jobId: string, dir: string, runtimeClass?: string) => {
    const ref = await backend.create({
      jobId,
      tenant: 'tenant-a',
      spec: SandboxSpecSchema.parse({ image: testImages.busybox, ...(runtimeClass ? { runtimeClass } : {}) }),
      agent: { redisUrl, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
    });
    refs.push(ref);
    await backend.waitReady(ref, 30_000, {
      isAgentAlive: async () => (await redis.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1,
    });
    const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
    const samples: { at: number; bytes: number }[] = [];
    let watch: DiskBudgetWatch | undefined;
    const stopped = new Promise<{ usage: SandboxDiskUsage; reason: string }>((resolve, reject) => {
      watch = new DiskBudgetWatch({
        // Only this test's sandbox: the engine is shared with other suites.
        backend: {
          ...backend,
          list: async () => (await backend.list()).filter((s) => s.jobId === jobId),
          diskUsage: (r) => backend.diskUsage!(r),
          halt: (r) => backend.halt!(r),
        },
        intervalMs: INTERVAL_MS,
        onMeasured: (_ref, usage) => samples.push({ at: Date.now(), bytes: usage.usedBytes }),
        onOverBudget: async (_ref, usage, reason) => resolve({ usage, reason }),
        onError: reject,
      });
    });
    await steps.push({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'fill',
      kind: 'run',
      command: 'sh',
      args: ['-c', filler(dir)],
    });
    watch?.start();
    const { usage, reason } = await stopped;
    await watch?.stop();
    // Halted: nothing in the container writes any more, so this is all it ever wrote.
    expect((await docker.getContainer(ref.id).inspect()).State.Running).toBe(false);
    const final = (await backend.diskUsage!(ref)) as SandboxDiskUsage;
    // The filler's rate as the watch saw it: the steepest step between two measures.
    let rate = 0;
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1]!;
      const b = samples[i]!;
      rate = Math.max(rate, ((b.bytes - a.bytes) / Math.max(1, b.at - a.at)) * 1000);
    }
    return { ref, usage, reason, final, rate, samples };
  };

  it('finds no storage quota on overlay2 over ext4 (this engine), so the watched budget applies', async () => {
    const info = (await docker.info()) as { Driver: string; DriverStatus: [string, string][] };
    const backing = info.DriverStatus.find(([k]) => k === 'Backing Filesystem')?.[1];
    const expected = !(info.Driver === 'overlay2' && backing !== 'xfs');
    // Only this engine's answer is checked: on xfs with pquota the probe would say true.
    if (expected) return;
    expect(await detectStorageQuota(docker, testImages.carrier)).toBe(false);
  });

  it("measures the same from the engine's report where the host's paths are out of reach", async () => {
    const jobId = `disk-engine-${tag}`;
    const ref = await backend.create({
      jobId,
      tenant: 'tenant-a',
      spec: SandboxSpecSchema.parse({ image: testImages.busybox }),
      agent: { redisUrl, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
    });
    refs.push(ref);
    await backend.waitReady(ref, 30_000, {
      isAgentAlive: async () => (await redis.exists(sandboxKeys(jobId, 'tagged').heartbeat)) === 1,
    });
    const steps = new StepChannel(redis, blocking, sandboxKeys(jobId, 'tagged'));
    const wrote = await steps.run({
      schemaVersion: SCHEMA_VERSION,
      stepId: 'write',
      kind: 'run',
      command: 'sh',
      args: ['-c', 'dd if=/dev/zero of=/work/w bs=1M count=8 && dd if=/dev/zero of=/tmp/l bs=1M count=4'],
    });
    expect(wrote.exitCode).toBe(0);
    const fromHost = (await new DockerDiskMeter(docker).usage(ref.id)) as SandboxDiskUsage;
    const fromEngine = (await new DockerDiskMeter(docker, false).usage(ref.id)) as SandboxDiskUsage;
    expect(fromHost.parts.work).toBeGreaterThanOrEqual(8 * MiB);
    expect(fromHost.parts.layer).toBeGreaterThanOrEqual(4 * MiB);
    // Allocated blocks (du) against the engine's sizes: the same files, within a MiB.
    expect(Math.abs(fromEngine.parts.work! - fromHost.parts.work!)).toBeLessThan(MiB);
    expect(Math.abs(fromEngine.parts.layer! - fromHost.parts.layer!)).toBeLessThan(MiB);
    await destroyTestSandbox(redis, backend, ref, 0);
  }, 60_000);

  for (const [where, dir, part, runtimeClass] of [
    ['the work tree', '/work', 'work', undefined],
    ['its own writable layer (/tmp)', '/tmp', 'layer', undefined],
    ...(gvisor ? ([['its own writable layer on gVisor (/fill)', '/fill', 'layer', 'gvisor']] as const) : []),
  ] as const) {
    it(`stops a sandbox filling ${where} with reason disk-budget, at most rate × interval past its limit, and frees the host's disk on destroy`, async () => {
      const baseline = await freeBytes();
      const jobId = `disk-${part}-${runtimeClass ?? 'runc'}-${tag}`;
      const { ref, usage, reason, final, rate } = await fillUntilStopped(jobId, dir, runtimeClass);
      expect(isDiskBudgetReason(reason)).toBe(true);
      expect(reason).toMatch(/^disk-budget: .* over its limit of 64 MB/);
      expect(usage.limitBytes).toBe(LIMIT);
      expect(usage.usedBytes).toBeGreaterThan(LIMIT);
      expect(final.parts[part]).toBeGreaterThan(LIMIT / 2);
      const overshoot = final.usedBytes - LIMIT;
      console.log(
        `${where}: rate ${(rate / MiB).toFixed(1)} MiB/s, overshoot ${(overshoot / MiB).toFixed(1)} MiB, bound ${((rate * INTERVAL_MS) / 1000 / MiB + SLACK / MiB).toFixed(1)} MiB`,
      );
      expect(rate).toBeGreaterThan(0);
      expect(overshoot).toBeLessThanOrEqual((rate * INTERVAL_MS) / 1000 + SLACK);

      // Where it wrote on the host: the work volume's directory and the container's own layer.
      const info = await docker.getContainer(ref.id).inspect();
      const written = [
        info.Mounts.find((m) => m.Destination === info.Config.WorkingDir)?.Source,
        (info.GraphDriver?.Data as { UpperDir?: string } | undefined)?.UpperDir,
      ].filter((path): path is string => path !== undefined);
      expect(written).toHaveLength(2);
      for (const path of written) expect(existsSync(path)).toBe(true);
      const beforeDestroy = await freeBytes();
      await destroyTestSandbox(redis, backend, ref, 0);
      expect(await dockerLeftovers(docker, jobId)).toEqual([]);
      const after = await freeBytes();
      // Everything it wrote left the disk with it: both places are gone. The free space is
      // printed, not bounded: parallel test files and other worktrees write to this disk too (one
      // CI run saw 3 MB written elsewhere during the destroy), so it cannot tell alone.
      for (const path of written) expect(existsSync(path)).toBe(false);
      console.log(
        `${where}: ${(final.usedBytes / MiB).toFixed(1)} MiB used, ${((after - beforeDestroy) / MiB).toFixed(1)} MiB freed by the destroy, free space vs baseline ${((after - baseline) / MiB).toFixed(1)} MiB`,
      );
    }, 120_000);
  }
});
