import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { destroyTestSandbox, dockerEngine, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SandboxSpecSchema } from '../sandbox-spec.js';
import { testImages } from '../testing/docker-test-env.js';
import { DockerBackend } from './docker-backend.js';
import { IptablesEgressFirewall } from './iptables-firewall.js';

// Each `iptables` the Docker backend runs is a child process of pod-lifecycle, tens of ms of CPU
// on a small VM: the sweep of orphaned rules runs at most once per interval however often the
// reaper and the disk budget list, and a host-network sandbox (which never had rules) is
// destroyed without one. A recording stand-in for the two commands counts the calls.

const { docker, skip } = await dockerEngine('egress-firewall-calls');
const tag = randomBytes(3).toString('hex');

describe.skipIf(skip)('DockerBackend: the firewall commands it runs', () => {
  let redis: Redis;
  let dir: string;
  let log: string;

  beforeAll(async () => {
    redis = new Redis(testRedisUrl());
    dir = await mkdtemp(join(tmpdir(), 'egress-calls-'));
    log = join(dir, 'calls.log');
    await writeFile(log, '');
    // Lists no rule and installs nothing: only the calls matter here.
    const recorder = join(dir, 'record.sh');
    await writeFile(recorder, `#!/bin/sh\necho "$0 $*" >> ${log}\n`);
    await chmod(recorder, 0o755);
  });
  afterAll(async () => {
    redis.disconnect();
    await rm(dir, { recursive: true, force: true });
  });

  const calls = async () => (await readFile(log, 'utf8')).split('\n').filter(Boolean);
  const backend = (egressSweepIntervalMs?: number) =>
    new DockerBackend({
      docker,
      redis,
      carrierImage: testImages.carrier,
      defaultNetwork: 'host',
      allowOpenRedis: true,
      firewall: new IptablesEgressFirewall({
        iptables: join(dir, 'record.sh'),
        restore: join(dir, 'record.sh'),
      }),
      ...(egressSweepIntervalMs === undefined ? {} : { egressSweepIntervalMs }),
    });

  it('sweeps orphaned rules on the first list, then not again within the interval', async () => {
    await writeFile(log, '');
    const b = backend(60_000);
    await b.list();
    const first = await calls();
    expect(first.filter((c) => c.includes(' -S'))).toHaveLength(2); // filter and nat
    await b.list();
    await b.list();
    expect(await calls()).toEqual(first);

    const eager = backend(0);
    await eager.list();
    await eager.list();
    expect((await calls()).filter((c) => c.includes(' -S'))).toHaveLength(6);
  });

  it('destroys a host-network sandbox without running iptables', async () => {
    const b = backend();
    const jobId = `egress-calls-${tag}`;
    const ref = await b.create({
      jobId,
      tenant: 'egress-calls',
      spec: SandboxSpecSchema.parse({ image: testImages.busybox }),
      agent: { redisUrl: testRedisUrl(), keyStyle: 'tagged' as const, heartbeatIntervalMs: 200 },
    });
    await writeFile(log, '');
    await destroyTestSandbox(redis, b, ref, 0);
    expect((await docker.listContainers({ all: true, filters: { id: [ref.id] } })).length).toBe(0);
    expect(await calls()).toEqual([]);
  });
});
