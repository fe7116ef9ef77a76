import { findCarrierImage } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { runSmoke } from './smoke.js';

// The smoke tour with sandboxes as Docker containers: the toolchain image is unmodified, the
// agent comes from the carrier image. Images are built locally (see scripts/ensure-docker.sh).
const image = process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm';

const carrier = findCarrierImage();

describe.skipIf(!carrier && process.env.CI !== 'true')('pipeline smoke on the Docker backend', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      label: 'dock',
      env: {
        SANDBOX_TYPE: 'docker',
        // The shared test Redis: loopback only, open `default` user (isolation: docker-reach.test.ts).
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDSTREAM_AGENT_CARRIER_IMAGE: carrier ?? 'sandstream/agent-carrier:dev',
      },
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });

  it('runs all step kinds, a failing step and a cancel in containers', async () => {
    await runSmoke(stack, image, 180_000);
  }, 300_000);
});
