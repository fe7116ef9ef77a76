import { intVar, SharedEnv, serviceEnvSchema } from '@sandstream/service-kit';
import { z } from 'zod';

export const PodLifecycleEnvSchema = serviceEnvSchema(8082).extend({
  /** Redis as the agent inside a sandbox reaches it (a container may need another host). Defaults to REDIS_URL. */
  AGENT_REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'AGENT_REDIS_URL must start with redis:// or rediss://')
    .optional(),
  /**
   * OTLP endpoint as the agent inside a sandbox reaches it, for its step spans. Defaults to
   * OTEL_EXPORTER_OTLP_ENDPOINT; unset, agents record no spans. Visible to sandboxed code: no
   * credentials here.
   */
  AGENT_OTEL_EXPORTER_OTLP_ENDPOINT: z
    .url({ error: 'AGENT_OTEL_EXPORTER_OTLP_ENDPOINT must be a URL' })
    .optional(),
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ error: 'OTEL_EXPORTER_OTLP_ENDPOINT must be a URL' }).optional(),
  SANDBOX_ACL: SharedEnv.SANDBOX_ACL,
  LEASE_SECONDS: SharedEnv.LEASE_SECONDS,
  /** Sandboxes one replica starts concurrently (create + wait-ready are mostly waiting). */
  POD_LIFECYCLE_CONCURRENCY: intVar(1, 1000, 20),
  /** Sandboxes one replica tears down concurrently. */
  POD_LIFECYCLE_DESTROY_CONCURRENCY: intVar(1, 1000, 20),
  /** Time the agent gets to exit after its shutdown step before it is killed. */
  DESTROY_GRACE_SECONDS: intVar(0, 600, 10),
  COMPLETION_SHARDS: SharedEnv.COMPLETION_SHARDS,
  SANDSTREAM_INSTALLATION: SharedEnv.SANDSTREAM_INSTALLATION,
  /** Safety-net period of the sandbox user restore (it also runs on every reconnect). */
  SANDBOX_ACL_RESTORE_SECONDS: intVar(1, 3600, 30),
});
export type PodLifecycleEnv = z.output<typeof PodLifecycleEnvSchema>;
