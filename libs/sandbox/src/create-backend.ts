import Dockerode from 'dockerode';
import type { Redis } from 'ioredis';
import type { SandboxBackend } from './backend.js';
import { dockerOptionsFromEnv, inProcessOptionsFromEnv } from './backend-env.js';
import { type BackendDetection, type DetectBackendOptions, detectBackend } from './detect-backend.js';
import { DockerBackend, type DockerBackendOptions } from './docker/docker-backend.js';
import { InProcessBackend, type InProcessBackendOptions } from './inprocess/inprocess-backend.js';
import type { KubernetesBackendOptions } from './kubernetes/index.js';
import { type ResourcePolicy, resourcePolicyFromEnv } from './resource-policy.js';

export interface CreateBackendOptions {
  /** Used by every backend for the shutdown step and key cleanup (and the in-process registry). */
  redis: Redis;
  /** Decides the backend and supplies settings; defaults to process.env. */
  env?: Record<string, string | undefined>;
  /** Detection knobs (Docker socket path, file check) for tests and unusual hosts. */
  detection?: Omit<DetectBackendOptions, 'env'>;
  /** Injected Docker client; default `new Dockerode()`, which honours DOCKER_HOST. */
  docker?: Dockerode;
  /** Settings over those read from the environment. */
  dockerOptions?: Omit<DockerBackendOptions, 'docker' | 'redis'>;
  inProcessOptions?: Omit<InProcessBackendOptions, 'redis'>;
  /** Operator defaults and maxima for every sandbox; default: read from env (ResourcePolicyEnvSchema). */
  resourcePolicy?: ResourcePolicy;
  /** Kubernetes backend options (kube config, API clients, settings); env settings fill the rest. */
  kubernetes?: Partial<Omit<KubernetesBackendOptions, 'redis'>>;
}

export interface CreatedBackend {
  backend: SandboxBackend;
  /** Which backend and why, for the caller to log once at start. */
  detection: BackendDetection;
}

/**
 * Picks the backend (detectBackend) and builds it with the injected clients. The Kubernetes
 * backend is loaded on demand, so a Docker or in-process deployment never loads its client.
 */
export async function createBackend(options: CreateBackendOptions): Promise<CreatedBackend> {
  const env = options.env ?? process.env;
  const detection = detectBackend({ ...options.detection, env });
  const resourcePolicy = options.resourcePolicy ?? resourcePolicyFromEnv(env);
  switch (detection.kind) {
    case 'inprocess':
      return {
        detection,
        backend: new InProcessBackend({
          ...inProcessOptionsFromEnv(env),
          resourcePolicy,
          ...options.inProcessOptions,
          redis: options.redis,
        }),
      };
    case 'docker':
      return {
        detection,
        backend: new DockerBackend({
          ...dockerOptionsFromEnv(env),
          resourcePolicy,
          ...options.dockerOptions,
          docker: options.docker ?? new Dockerode(),
          redis: options.redis,
        }),
      };
    case 'kubernetes': {
      const kube = await import('./kubernetes/index.js');
      const given = options.kubernetes ?? {};
      // Settings from the environment only when the caller did not pass the one required setting.
      const base = given.agentCarrierImage
        ? { agentCarrierImage: given.agentCarrierImage }
        : kube.kubernetesSettingsFromEnv(env);
      return {
        detection,
        backend: kube.createKubernetesBackend({
          ...base,
          resourcePolicy,
          ...given,
          agentCarrierImage: given.agentCarrierImage ?? base.agentCarrierImage,
          redis: options.redis,
        }),
      };
    }
  }
}
