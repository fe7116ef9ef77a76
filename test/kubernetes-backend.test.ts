import { randomBytes } from 'node:crypto';
import { CoreV1Api } from '@kubernetes/client-node';
import { registerBackendSuite } from '@sandstream/sandbox/testing';
import { dockerEngine, testRedisUrl } from '@sandstream/test-support';
import { afterAll } from 'vitest';
import { createKubernetesBackend } from '../libs/sandbox/src/kubernetes/index.js';
import { type KubeApiStandin, startKubeApiStandin } from './kube-api-standin/index.js';
import { images, kubernetesLeftovers } from './kubernetes-test-env.js';

/**
 * The shared SandboxBackend contract, run against the Kubernetes backend through the real
 * @kubernetes/client-node and the API stand-in, whose pods run on the local Docker engine.
 */
const redisUrl = testRedisUrl();
const { docker, skip } = await dockerEngine('kubernetes-backend');
const namespace = `suite-${randomBytes(4).toString('hex')}`;
const standin: KubeApiStandin | undefined = skip ? undefined : await startKubeApiStandin({ docker });

afterAll(async () => {
  await standin?.close();
});

for (const image of [images.debian, images.busybox]) {
  registerBackendSuite({
    name: `kubernetes via kube-api-standin (${image})`,
    skip,
    redisUrl,
    createBackend: (redis) =>
      createKubernetesBackend({
        // The shared test Redis has an open `default` user; the guard is tested in open-redis.test.ts.
        allowOpenRedis: true,
        kubeConfig: standin!.kubeConfig(namespace),
        namespace,
        agentCarrierImage: images.carrier,
        redis,
        // Short, so the hang test's `sleep` (which ignores SIGTERM as PID 1) is killed soon.
        terminationGraceSeconds: 2,
        heartbeatPollMs: 100,
      }),
    agent: { heartbeatIntervalMs: 200 },
    spec: { image },
    // An image neither on the stand-in's engine nor reachable: the pod's pull fails at once.
    missingImage: 'sandstream/does-not-exist:never',
    // Kubernetes secretEnv names Secrets in the namespace, not variables of the test process.
    secretsFromProcessEnv: false,
    leftovers: (jobId) => kubernetesLeftovers(standin!, docker, namespace, jobId),
    removePersistentWorkspace: async (name) => {
      await standin!
        .kubeConfig(namespace)
        .makeApiClient(CoreV1Api)
        .deleteNamespacedPersistentVolumeClaim({ name, namespace })
        .catch(() => {});
    },
    testTimeoutMs: 120_000,
  });
}
