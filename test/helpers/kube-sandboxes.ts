import { CoreV1Api, type KubeConfig, NetworkingV1Api } from '@kubernetes/client-node';
import { destroyTestSandbox, testRedisUrl } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import type Dockerode from 'dockerode';
import { Redis } from 'ioredis';
import type { CreateSandboxRequest, SandboxRef } from '../../libs/sandbox/src/backend.js';
import {
  createKubernetesBackend,
  type KubernetesBackend,
  type KubernetesBackendOptions,
} from '../../libs/sandbox/src/kubernetes/index.js';
import { type SandboxSpecInput, SandboxSpecSchema } from '../../libs/sandbox/src/sandbox-spec.js';
import { type KubeApiStandin, startKubeApiStandin } from '../kube-api-standin/index.js';
import { images } from '../kubernetes-test-env.js';

/**
 * The Kubernetes backend driven against the API stand-in, as the backend's own suites use it: one
 * stand-in, one namespace, the shared test Redis, and sandboxes started and torn down for the
 * test. The stand-in lives in test/, and this helper with it, not in libs/test-support: that
 * package imports no workspace lib (libs/sandbox depends on it for its tests), and the stand-in
 * and the backend are libs/sandbox's.
 */
export interface KubeSandboxes {
  standin: KubeApiStandin;
  namespace: string;
  kubeConfig: KubeConfig;
  core: CoreV1Api;
  networking: NetworkingV1Api;
  /** The shared test Redis, as the backend and the agents use it. */
  redis: Redis;
  redisUrl: string;
  backend: KubernetesBackend;
  /** A create request of the test's tenant for `jobId`, the spec parsed (busybox by default). */
  request(jobId: string, spec?: Partial<SandboxSpecInput>): CreateSandboxRequest;
  /** Creates the sandbox and waits until its agent heart-beats; destroyed by close(). */
  start(request: CreateSandboxRequest): Promise<SandboxRef>;
  /** Destroys every sandbox start() made, then closes the backend, the stand-in and Redis. */
  close(): Promise<void>;
}

export async function startKubeSandboxes(options: {
  docker: Dockerode;
  namespace: string;
  /** Backend options over the suites' defaults (open test Redis allowed, short grace). */
  backend?: Partial<KubernetesBackendOptions>;
}): Promise<KubeSandboxes> {
  const { docker, namespace } = options;
  const redisUrl = testRedisUrl();
  const standin = await startKubeApiStandin({ docker });
  const kubeConfig = standin.kubeConfig(namespace);
  const redis = new Redis(redisUrl);
  const backend = createKubernetesBackend({
    // The shared test Redis has an open `default` user; the guard is tested in open-redis.test.ts.
    allowOpenRedis: true,
    kubeConfig,
    namespace,
    agentCarrierImage: images.carrier,
    redis,
    terminationGraceSeconds: 1,
    heartbeatPollMs: 100,
    ...options.backend,
  });
  const refs: SandboxRef[] = [];
  return {
    standin,
    namespace,
    kubeConfig,
    core: kubeConfig.makeApiClient(CoreV1Api),
    networking: kubeConfig.makeApiClient(NetworkingV1Api),
    redis,
    redisUrl,
    backend,
    request: (jobId, spec = {}) => ({
      jobId,
      tenant: 'tenant-a',
      spec: SandboxSpecSchema.parse({ image: images.busybox, ...spec }),
      agent: { redisUrl, keyStyle: 'tagged', heartbeatIntervalMs: 200 },
    }),
    async start(request) {
      const ref = await backend.create(request);
      refs.push(ref);
      await backend.waitReady(ref, 30_000, {
        isAgentAlive: async () => (await redis.exists(sandboxKeys(request.jobId, 'tagged').heartbeat)) === 1,
      });
      return ref;
    },
    async close() {
      for (const ref of refs) await destroyTestSandbox(redis, backend, ref, 0).catch(() => {});
      await backend.close();
      await standin.close();
      redis.disconnect();
    },
  };
}
