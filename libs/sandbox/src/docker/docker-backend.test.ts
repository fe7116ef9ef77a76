import Dockerode from 'dockerode';
import { registerBackendSuite } from '../testing/backend-suite.js';
import { DockerBackend } from './docker-backend.js';
import { persistentVolumeName } from './docker-names.js';
import { dockerEngine, dockerLeftovers, testImages } from './docker-test-env.js';

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const { skip } = await dockerEngine();
const docker = new Dockerode();

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
      }),
    agent: { heartbeatIntervalMs: 200 },
    spec: { image },
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
