import { SandboxLabels } from '@sandstream/sandbox';
import { findCarrierImage } from '@sandstream/test-support';
import Dockerode from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { waitAll } from './job-helpers.js';

// Issue 27: pod-lifecycle killed (kill -9) while it created 20 Docker sandboxes. BullMQ hands
// each unfinished create to the restarted pod-lifecycle; a container the dead one had already
// made used to fail that job ("a sandbox for job X already exists … destroy it first"). A create
// is idempotent now (the earlier attempt's sandbox is replaced): all 20 jobs succeed.
const image = process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm';
const carrier = findCarrierImage();
const JOBS = 20;

describe.skipIf(!carrier && process.env.CI !== 'true')('pod-lifecycle crash during Docker creates', () => {
  let stack: Stack;
  const docker = new Dockerode();
  beforeAll(async () => {
    stack = await startStack({
      label: 'dcrash',
      env: {
        SANDBOX_TYPE: 'docker',
        // The shared test Redis: loopback only, open `default` user (isolation: docker-reach.test.ts).
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDSTREAM_AGENT_CARRIER_IMAGE: carrier ?? 'sandstream/agent-carrier:dev',
        SCHEDULER_GLOBAL_SLOTS: String(JOBS),
        SCHEDULER_TENANT_SLOTS: String(JOBS),
      },
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  /** Toolchain containers of this run's jobs that exist right now. */
  const containers = async () =>
    (
      await docker.listContainers({
        all: true,
        filters: { label: [`${SandboxLabels.managedBy}=${SandboxLabels.managedByValue}`] },
      })
    ).filter((c) => (c.Labels[SandboxLabels.jobId] ?? '').startsWith(`${stack.namespace}-`));

  it('kill -9 of pod-lifecycle during 20 Docker creates: 20 jobs succeed', async () => {
    const ids: string[] = [];
    for (let i = 0; i < JOBS; i++) {
      const { jobId } = await stack.client.submit({
        id: `${stack.namespace}-j${i}`,
        image,
        steps: [{ command: 'echo', args: [`ok-${i}`] }],
      });
      ids.push(jobId);
    }
    // Mid-way: some containers made, most jobs still starting (their creates in flight).
    await expect
      .poll(
        async () => {
          const states = await Promise.all(ids.map(async (id) => (await stack.client.get(id))?.state));
          const starting = states.filter((s) => s === 'starting').length;
          return (await containers()).length > 0 && starting >= JOBS / 4;
        },
        { timeout: 120_000, interval: 100 },
      )
      .toBe(true);
    await stack.crashAndRestart('pod-lifecycle');

    const records = await waitAll(stack.client, ids, 300_000);
    const failed = [...records.values()].filter((r) => r.state !== 'succeeded');
    expect(
      failed.map((r) => `${r.id}: ${r.state} ${r.reason ?? ''}`),
      stack.logs().slice(-4000),
    ).toEqual([]);
  }, 480_000);
});
