import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';
import { runSmoke } from './smoke.js';

// The smoke tour with sandboxes as Docker containers: the toolchain image is unmodified, the
// agent comes from the carrier image. Images are built locally (see scripts/ensure-docker.sh).
const image = process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm';

function findCarrier(): string | undefined {
  if (process.env.SANDSTREAM_CARRIER_IMAGE) return process.env.SANDSTREAM_CARRIER_IMAGE;
  try {
    const tags = execFileSync('docker', ['images', 'sandstream/agent-carrier', '--format', '{{.Tag}}'], {
      encoding: 'utf8',
    })
      .trim()
      .split('\n')
      .filter(Boolean);
    const tag = tags.includes('dev') ? 'dev' : tags[0];
    return tag ? `sandstream/agent-carrier:${tag}` : undefined;
  } catch {
    return undefined;
  }
}
const carrier = findCarrier();

describe.skipIf(!carrier && process.env.CI !== 'true')('pipeline smoke on the Docker backend', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      label: 'dock',
      env: {
        SANDBOX_TYPE: 'docker',
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
