import { KubeConfig } from '@kubernetes/client-node';
import { testRedisUrl } from '@sandstream/test-support';
import Dockerode from 'dockerode';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createBackend } from './create-backend.js';
import { DockerBackend } from './docker/docker-backend.js';
import { InProcessBackend } from './inprocess/inprocess-backend.js';
import { SandboxSpecSchema } from './sandbox-spec.js';

const redis = new Redis(testRedisUrl(), { lazyConnect: true });
afterAll(() => redis.disconnect());

describe('createBackend', () => {
  it('builds the in-process backend when nothing else is there', async () => {
    const { backend, detection } = await createBackend({
      redis,
      env: {},
      detection: { fileExists: () => false },
    });
    expect(backend).toBeInstanceOf(InProcessBackend);
    expect(detection.kind).toBe('inprocess');
  });

  it('builds the Docker backend with the injected client for DOCKER_HOST', async () => {
    const docker = new Dockerode({ host: '127.0.0.1', port: 1 });
    const { backend, detection } = await createBackend({
      redis,
      docker,
      env: { DOCKER_HOST: 'tcp://127.0.0.1:1', SANDSTREAM_DOCKER_AGENT_VOLUME: 'cached' },
    });
    expect(backend).toBeInstanceOf(DockerBackend);
    expect(detection.reason).toMatch(/DOCKER_HOST/);
    // The injected client is the one used: its unreachable engine is what the error names.
    await expect(backend.list()).rejects.toThrow(/ECONNREFUSED/);
    // create() turns an engine failure into a SandboxStartError a caller can classify.
    await expect(
      backend.create({
        jobId: 'engine-down',
        tenant: 't',
        spec: SandboxSpecSchema.parse({ image: 'x' }),
        agent: { redisUrl: 'redis://127.0.0.1:6379', keyStyle: 'tagged' },
      }),
    ).rejects.toMatchObject({
      name: 'SandboxStartError',
      reason: 'backend_error',
      message: /Docker engine: .*ECONNREFUSED/,
    });
  });

  it('loads the Kubernetes backend on demand with an injected kube config', async () => {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromOptions({
      clusters: [{ name: 'c', server: 'http://127.0.0.1:1' }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const { backend } = await createBackend({
      redis,
      env: {
        KUBERNETES_SERVICE_HOST: '10.0.0.1',
        SANDSTREAM_AGENT_CARRIER_IMAGE: 'sandstream/agent-carrier:dev',
      },
      kubernetes: { kubeConfig },
    });
    expect(backend.kind).toBe('kubernetes');
  });

  it('refuses a bad setting naming the variable', async () => {
    await expect(
      createBackend({ redis, env: { SANDBOX_TYPE: 'docker', SANDSTREAM_DOCKER_AGENT_VOLUME: 'sometimes' } }),
    ).rejects.toThrow(/SANDSTREAM_DOCKER_AGENT_VOLUME must be per-job or cached/);
  });
});
