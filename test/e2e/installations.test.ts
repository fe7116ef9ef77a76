import { spawnSync } from 'node:child_process';
import { createKeySpace, JobStore } from '@sandstream/bus';
import { SandboxLabels } from '@sandstream/sandbox';
import { findCarrierImage, pollUntil } from '@sandstream/test-support';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Two deployments on one Docker engine, each with its own Redis, both told they are
// SANDSTREAM_INSTALLATION=shared (as two compose stacks are both `compose` by default). Their
// reapers run with no grace at all and look at every job id: neither may destroy a sandbox of
// the other, whose job lives in a Redis it cannot see.
const image = process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm';
const carrier = findCarrierImage();

const redisA = usePrivateRedis({ maxRetriesPerRequest: null });
const redisB = usePrivateRedis({ maxRetriesPerRequest: null });
const stacks: Stack[] = [];

afterAll(async () => {
  for (const s of stacks) await s.stop();
});

/** The state of each sandbox container of a job on the engine (`running`, `exited`, …). */
function containers(jobId: string): { state: string; installation: string; installationId: string }[] {
  const listed = spawnSync(
    'docker',
    [
      'ps',
      '-a',
      '--filter',
      `label=${SandboxLabels.jobId}=${jobId}`,
      '--filter',
      'label=sandstream.dev/role=toolchain',
      '--format',
      `{{.State}} {{.Label "${SandboxLabels.installation}"}} {{.Label "${SandboxLabels.installationId}"}}`,
    ],
    { encoding: 'utf8', timeout: 20_000 },
  );
  return listed.stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [state = '', installation = '', installationId = ''] = line.split(' ');
      return { state, installation, installationId };
    });
}

const reaperPasses = (stack: Stack) =>
  (stack.services.get('reaper')?.[0]?.output() ?? '').split('"msg":"reaper pass done"').length - 1;

describe.skipIf(!carrier && process.env.CI !== 'true')('two installations on one Docker engine', () => {
  it("neither reaper destroys the other's sandboxes, though they share an installation name", async () => {
    const start = (redis: typeof redisA) =>
      startStack({
        label: 'inst',
        only: ['scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper'],
        redis: () => new Redis(redis.server.url, { maxRetriesPerRequest: null }),
        env: {
          REDIS_URL: redis.server.url,
          SANDSTREAM_INSTALLATION: 'shared',
          SANDBOX_TYPE: 'docker',
          SANDSTREAM_DOCKER_NETWORK: 'host',
          SANDSTREAM_ALLOW_OPEN_REDIS: '1',
          SANDSTREAM_AGENT_CARRIER_IMAGE: carrier ?? 'sandstream/agent-carrier:dev',
          // As aggressive as a reaper gets, and over every job id, not only this run's.
          REAPER_JOB_GLOB: '*',
          REAPER_INTERVAL_SECONDS: '1',
          REAPER_SANDBOX_GRACE_SECONDS: '0',
          REAPER_PAUSE_MS: '0',
        },
      });
    const a = await start(redisA);
    stacks.push(a);
    const b = await start(redisB);
    stacks.push(b);

    const submit = async (stack: Stack) => {
      const { jobId } = await stack.client.submit({
        id: `${stack.namespace}-long`,
        image,
        steps: [{ command: 'sleep', args: ['300'] }],
      });
      await pollUntil(`${jobId} running`, async () => (await stack.client.get(jobId))?.state === 'running', {
        timeoutMs: 120_000,
        intervalMs: 250,
      });
      return jobId;
    };
    const [jobA, jobB] = await Promise.all([submit(a), submit(b)]);

    // Three full passes of each reaper with both sandboxes in sight.
    const passesA = reaperPasses(a);
    const passesB = reaperPasses(b);
    await pollUntil(
      'three reaper passes each',
      () => reaperPasses(a) >= passesA + 3 && reaperPasses(b) >= passesB + 3,
      {
        timeoutMs: 60_000,
        intervalMs: 250,
      },
    );
    expect(containers(jobA).map((c) => c.state)).toEqual(['running']);
    expect(containers(jobB).map((c) => c.state)).toEqual(['running']);
    expect((await a.client.get(jobA))?.state).toBe('running');
    expect((await b.client.get(jobB))?.state).toBe('running');
    // One name, two Redis servers: two installation ids.
    const [[containerA], [containerB]] = [containers(jobA), containers(jobB)];
    expect(containerA?.installation).toBe('shared');
    expect(containerB?.installation).toBe('shared');
    expect(containerA?.installationId).toMatch(/^r-[0-9a-f]{12}$/);
    expect(containerB?.installationId).toMatch(/^r-[0-9a-f]{12}$/);
    expect(containerA?.installationId).not.toBe(containerB?.installationId);

    // Each still cleans up its own: A's job vanishes from A's Redis (as when Redis loses it), and
    // A's reaper destroys its sandbox; B's stays.
    await new JobStore({ redis: redisA.redis, keys: createKeySpace(a.namespace) }).delete(jobA);
    await pollUntil('the vanished job’s sandbox destroyed', () => containers(jobA).length === 0, {
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    expect(containers(jobB).map((c) => c.state)).toEqual(['running']);
    expect((await b.client.get(jobB))?.state).toBe('running');
    await b.client.cancel(jobB);
  }, 300_000);
});
