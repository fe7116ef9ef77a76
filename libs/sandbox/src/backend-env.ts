import { z } from 'zod';
import type { DockerBackendOptions } from './docker/docker-backend.js';
import { DEFAULT_PULL_LIMITS } from './docker/image-pull.js';
import type { InProcessBackendOptions } from './inprocess/inprocess-backend.js';
import { allowOpenRedisVar } from './open-redis.js';

const blank = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);
const optionalString = z.preprocess(blank, z.string().optional());

/** A whole number of seconds from 1 to `max`, the error naming the variable and the limit. */
function pullSeconds(name: string, max: number) {
  return z.preprocess(
    blank,
    z.coerce
      .number({ error: `${name} must be a number of seconds` })
      .int(`${name} must be a whole number of seconds`)
      .min(1, `${name} must be at least 1 second`)
      .max(max, `${name} must be at most ${max} seconds`)
      .optional(),
  );
}

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
  /**
   * `iptables` (default): each Docker sandbox's egress policy as host firewall rules (needs root);
   * `off`: no rules, so only `internet` sandboxes (and `none` on the deny-egress network) start.
   */
  SANDSTREAM_DOCKER_EGRESS: z.preprocess(
    blank,
    z
      .enum(['iptables', 'off'], {
        error: (i) => `SANDSTREAM_DOCKER_EGRESS must be iptables or off (got ${JSON.stringify(i.input)})`,
      })
      .optional(),
  ),
  SANDSTREAM_DOCKER_DENY_EGRESS_NETWORK: optionalString,
  /**
   * The cgroup every sandbox container is created under (Docker's `--cgroup-parent`): a slice an
   * operator caps or accounts for as a whole, e.g. to read what all sandboxes cost together.
   */
  SANDSTREAM_DOCKER_CGROUP_PARENT: z.preprocess(
    blank,
    z
      .string()
      .max(200, 'SANDSTREAM_DOCKER_CGROUP_PARENT must be at most 200 characters')
      .regex(
        /^[A-Za-z0-9_./-]+$/,
        'SANDSTREAM_DOCKER_CGROUP_PARENT must be a cgroup path (letters, digits, _ . / -)',
      )
      .refine((v) => !v.split('/').includes('..'), 'SANDSTREAM_DOCKER_CGROUP_PARENT must not contain ..')
      .optional(),
  ),
  /**
   * pod-lifecycle's Docker client configuration file (`auths`) with the credentials of the
   * private registries images are pulled from; mounted as a secret, never sent through Redis.
   */
  SANDSTREAM_DOCKER_CONFIG_FILE: optionalString,
  /** Seconds an image pull may take in all (default 600) and without progress (default 120). */
  SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS: pullSeconds('SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS', 3600),
  SANDSTREAM_DOCKER_PULL_STALL_SECONDS: pullSeconds('SANDSTREAM_DOCKER_PULL_STALL_SECONDS', 3600),
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
  if (e.SANDSTREAM_DOCKER_EGRESS) options.egress = e.SANDSTREAM_DOCKER_EGRESS;
  if (e.SANDSTREAM_DOCKER_CGROUP_PARENT) options.cgroupParent = e.SANDSTREAM_DOCKER_CGROUP_PARENT;
  if (e.SANDSTREAM_DOCKER_CONFIG_FILE) options.registryAuthFile = e.SANDSTREAM_DOCKER_CONFIG_FILE;
  if (e.SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS || e.SANDSTREAM_DOCKER_PULL_STALL_SECONDS) {
    options.pullLimits = {
      timeoutMs: (e.SANDSTREAM_DOCKER_PULL_TIMEOUT_SECONDS ?? DEFAULT_PULL_LIMITS.timeoutMs / 1000) * 1000,
      stallMs: (e.SANDSTREAM_DOCKER_PULL_STALL_SECONDS ?? DEFAULT_PULL_LIMITS.stallMs / 1000) * 1000,
    };
  }
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
