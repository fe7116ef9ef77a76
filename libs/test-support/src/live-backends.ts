import { findCarrierImage } from './docker.js';

/** A backend the live-sandbox suites run on: the image to use and the services' environment. */
export interface LiveBackend {
  name: 'in-process' | 'docker';
  image: string;
  env: Record<string, string>;
}

/**
 * The in-process backend always; Docker (an unmodified image, the agent from the carrier) when
 * an engine and the carrier are there, and always under CI, where their absence is a failure.
 */
export function liveBackends(): LiveBackend[] {
  const backends: LiveBackend[] = [{ name: 'in-process', image: 'debian:bookworm-slim', env: {} }];
  const carrier = findCarrierImage();
  if (carrier || process.env.CI === 'true') {
    backends.push({
      name: 'docker',
      image: process.env.SANDSTREAM_TEST_IMAGE_DEBIAN ?? 'sandstream/debian:bookworm',
      env: {
        SANDBOX_TYPE: 'docker',
        // The shared test Redis: loopback only, open `default` user (isolation: docker-reach.test.ts).
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDSTREAM_AGENT_CARRIER_IMAGE: carrier ?? 'sandstream/agent-carrier:dev',
      },
    });
  }
  return backends;
}
