import { z } from 'zod';
import type { DockerBackendOptions } from './docker/docker-backend.js';
import type { InProcessBackendOptions } from './inprocess/inprocess-backend.js';
import { allowOpenRedisVar } from './open-redis.js';

const blank = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);
const optionalString = z.preprocess(blank, z.string().optional());

/** Environment settings of the Docker and in-process backends (Kubernetes has its own, see kubernetes/). */
export const LocalBackendEnvSchema = z.object({
  /** Same variable the Kubernetes backend reads, so one setting names the carrier everywhere. */
  SANDSTREAM_AGENT_CARRIER_IMAGE: optionalString,
  SANDSTREAM_DOCKER_NETWORK: optionalString,
  SANDSTREAM_DOCKER_REDIS_URL: z.preprocess(
    blank,
    z
      .string()
      .regex(/^rediss?:\/\//, 'SANDSTREAM_DOCKER_REDIS_URL must be a redis:// or rediss:// URL')
      .optional(),
  ),
  /** Development only: create Docker sandboxes even when their Redis has an open `default` user. */
  SANDSTREAM_ALLOW_OPEN_REDIS: allowOpenRedisVar,
  SANDSTREAM_DOCKER_AGENT_VOLUME: z.preprocess(
    blank,
    z
      .enum(['per-job', 'cached'], {
        error: (i) =>
          `SANDSTREAM_DOCKER_AGENT_VOLUME must be per-job or cached (got ${JSON.stringify(i.input)})`,
      })
      .optional(),
  ),
  SANDSTREAM_DOCKER_DENY_EGRESS_NETWORK: optionalString,
  SANDSTREAM_DOCKER_DENY_EGRESS_REDIS_URL: z.preprocess(
    blank,
    z
      .string()
      .regex(/^rediss?:\/\//, 'SANDSTREAM_DOCKER_DENY_EGRESS_REDIS_URL must be a redis:// or rediss:// URL')
      .optional(),
  ),
  SANDSTREAM_AGENT_ENTRY: optionalString,
  SANDSTREAM_INPROCESS_ROOT: optionalString,
  /**
   * `1`: the in-process backend's file steps may reach any path the services' user can, as run
   * steps can. Off by default: they stay inside the job's directory (docs/sandbox-backends.md).
   */
  SANDSTREAM_INPROCESS_UNCONFINED_FILES: z.preprocess(
    blank,
    z
      .enum(['0', '1'], {
        error: (i) => `SANDSTREAM_INPROCESS_UNCONFINED_FILES must be 0 or 1 (got ${JSON.stringify(i.input)})`,
      })
      .optional(),
  ),
});

function parseEnv(env: Record<string, string | undefined>) {
  const parsed = LocalBackendEnvSchema.safeParse(env);
  if (!parsed.success)
    throw new Error(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  return parsed.data;
}

export function dockerOptionsFromEnv(
  env: Record<string, string | undefined>,
): Omit<DockerBackendOptions, 'docker' | 'redis'> {
  const e = parseEnv(env);
  const options: Omit<DockerBackendOptions, 'docker' | 'redis'> = {};
  if (e.SANDSTREAM_AGENT_CARRIER_IMAGE) options.carrierImage = e.SANDSTREAM_AGENT_CARRIER_IMAGE;
  if (e.SANDSTREAM_DOCKER_NETWORK) options.defaultNetwork = e.SANDSTREAM_DOCKER_NETWORK;
  if (e.SANDSTREAM_DOCKER_REDIS_URL) options.sandboxRedisUrl = e.SANDSTREAM_DOCKER_REDIS_URL;
  if (e.SANDSTREAM_ALLOW_OPEN_REDIS) options.allowOpenRedis = true;
  if (e.SANDSTREAM_DOCKER_AGENT_VOLUME) options.agentVolume = e.SANDSTREAM_DOCKER_AGENT_VOLUME;
  const network = e.SANDSTREAM_DOCKER_DENY_EGRESS_NETWORK;
  const redisUrl = e.SANDSTREAM_DOCKER_DENY_EGRESS_REDIS_URL;
  if (network || redisUrl) {
    if (!network || !redisUrl) {
      throw new Error(
        'SANDSTREAM_DOCKER_DENY_EGRESS_NETWORK and SANDSTREAM_DOCKER_DENY_EGRESS_REDIS_URL must be set together',
      );
    }
    options.denyEgress = { network, redisUrl };
  }
  return options;
}

export function inProcessOptionsFromEnv(
  env: Record<string, string | undefined>,
): Omit<InProcessBackendOptions, 'redis'> {
  const e = parseEnv(env);
  const options: Omit<InProcessBackendOptions, 'redis'> = {};
  if (e.SANDSTREAM_AGENT_ENTRY) options.agentEntry = e.SANDSTREAM_AGENT_ENTRY;
  if (e.SANDSTREAM_INPROCESS_ROOT) options.root = e.SANDSTREAM_INPROCESS_ROOT;
  if (e.SANDSTREAM_INPROCESS_UNCONFINED_FILES === '1') options.unconfinedFileSteps = true;
  return options;
}
