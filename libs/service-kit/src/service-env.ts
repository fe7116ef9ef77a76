import {
  ALLOW_UNSAFE_REDIS_ACL_ENV,
  DEFAULT_COMPLETION_SHARDS,
  DEFAULT_NAMESPACE,
  InstallationSchema,
  RedisEnvSchema,
} from '@sandstream/bus';
import { z } from 'zod';
import { intVar, portVar } from './env-config.js';

/**
 * Environment variables more than one service reads, each declared once, so that a default or
 * a rule cannot drift between services that must agree (pod-lifecycle and the dispatcher on the
 * shard count, scheduler and pod-lifecycle on the lease length, pod-lifecycle and the reaper on
 * the installation a sandbox is labelled with). A service's schema is
 * `serviceEnvSchema(<its health port>).extend({ ...pick what it reads from SharedEnv, own vars })`.
 */
export const SharedEnv = {
  /** A slot lease lapses this long after its last renewal (pod-lifecycle renews live jobs). */
  LEASE_SECONDS: intVar(5, 3600, 60),
  /** Completion shards; pod-lifecycle picks each agent's, the dispatcher reads them all. */
  COMPLETION_SHARDS: intVar(1, 1024, DEFAULT_COMPLETION_SHARDS),
  /** Per-sandbox Redis users: `auto` uses them where the server supports ACLs. */
  SANDBOX_ACL: z
    .enum(['auto', 'on', 'off'], { error: 'SANDBOX_ACL must be auto, on or off' })
    .default('auto'),
  /**
   * The installation name sandboxes are labelled with (pod-lifecycle). Default: the installation
   * id this Redis keeps for the namespace (InstallationIdentity in libs/bus), which the reaper
   * also requires on any sandbox it destroys, so two deployments sharing a name never touch
   * each other's sandboxes.
   */
  SANDSTREAM_INSTALLATION: InstallationSchema.optional(),
  /**
   * What one sandbox may send Redis per second (0 turns the check off): commands where Redis
   * counts them per connection (`tot-cmds`), else stream entries and list items added to its
   * keys. The step-dispatcher enforces it; pod-lifecycle tells each agent (AGENT_REDIS_RATE_LIMIT),
   * which writes its output at half of it (docs/step-dispatcher.md, "A Redis rate per sandbox").
   */
  SANDBOX_REDIS_RATE_LIMIT: intVar(0, 10_000_000, 30_000),
} as const;

/** What every service reads: Redis, the namespace and its health port. */
export function serviceEnvSchema(defaultHealthPort: number) {
  return RedisEnvSchema.extend({
    /** Isolates queues and shared keys (tests, several installations on one Redis). */
    SANDSTREAM_NAMESPACE: z
      .string()
      .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." and "-"')
      .default(DEFAULT_NAMESPACE),
    /** 0 picks a free port (printed in the start-up log). */
    HEALTH_PORT: portVar(defaultHealthPort),
    /**
     * Loopback by default: a sandbox on a Docker bridge reaches the host's other addresses, so
     * a health server on all interfaces would be one of the host ports it can probe. Containers
     * and pods whose probes come from outside set 0.0.0.0 (docker-compose.yml, deploy/k8s).
     */
    HEALTH_HOST: z.string().trim().min(1, 'HEALTH_HOST must name an address').default('127.0.0.1'),
    /**
     * `1`: start on a Redis that would drop every transaction when it replays its append-only file
     * (AOF on, Redis before 8.8, `default` user without permissions; docs/reliability.md), with a
     * warning instead of refusing. For an operator who knows their build carries the fix.
     */
    [ALLOW_UNSAFE_REDIS_ACL_ENV]: z
      .enum(['1', 'true', '0', 'false'], {
        error: (i) =>
          `${ALLOW_UNSAFE_REDIS_ACL_ENV} must be 1, true, 0 or false (got ${JSON.stringify(i.input)})`,
      })
      .optional()
      .transform((v) => v === '1' || v === 'true'),
  });
}

/** The part of every service's environment runService uses itself. */
export type ServiceEnv = z.output<ReturnType<typeof serviceEnvSchema>>;
