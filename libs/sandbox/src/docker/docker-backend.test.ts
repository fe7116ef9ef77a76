import { dockerEngine, ImageRegistry, testRedisUrl } from '@sandstream/test-support';
import { afterAll } from 'vitest';
import { registerBackendSuite } from '../testing/backend-suite.js';
import { dockerLeftovers, testImages } from '../testing/docker-test-env.js';
import { DockerBackend } from './docker-backend.js';
import { persistentVolumeName } from './docker-names.js';

const redisUrl = testRedisUrl();
const { docker, skip } = await dockerEngine('docker-backend');
// The shared test Redis listens on loopback with an open `default` user: these suites test
// other things, so they take the development settings (isolation: docker-reach.test.ts).
const devNetwork = { defaultNetwork: 'host', allowOpenRedis: true } as const;
// A missing image is pulled first: a name a registry started here does not have is the one that
// "does not exist" (the engine's default registry cannot be reached from this machine).
// Without a registry here (outside CI) the missing-image case is skipped: the engine's default
// registry cannot be reached, so a name there says nothing about "does not exist".
const registry = skip || ImageRegistry.unavailable() ? undefined : await ImageRegistry.start();
afterAll(async () => {
  await registry?.stop();
});

for (const [image, agentVolume] of [
  [testImages.debian, 'per-job'],
  [testImages.busybox, 'cached'],
] as const) {
  registerBackendSuite({
    name: `docker (${image}, ${agentVolume} agent volume)`,
    skip,
    redisUrl,
    createBackend: (redis) =>
      new DockerBackend({
        docker,
        redis,
        carrierImage: testImages.carrier,
        agentVolume,
        defaultGraceMs: 3000,
        ...devNetwork,
      }),
    agent: { heartbeatIntervalMs: 200 },
    spec: { image },
    missingImage: registry ? `${registry.host}/sandstream/does-not-exist-${agentVolume}:never` : false,
    leftovers: (jobId) => dockerLeftovers(docker, jobId),
    removePersistentWorkspace: async (name) => {
      await docker
        .getVolume(persistentVolumeName(name))
        .remove()
        .catch(() => {});
    },
    testTimeoutMs: 120_000,
  });
}
