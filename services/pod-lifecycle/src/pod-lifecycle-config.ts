import { ResourcePolicyEnvSchema } from '@sandstream/sandbox';
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
  /**
   * The installation's NATS (the archiver's, read by the reaper): set, with LOG_ARCHIVE not
   * `off`, agents are started with AGENT_LOG_ARCHIVE=1 (agent-env.ts). This service connects to
   * it for snapshots only (their bytes live in its object store, snapshot-processor.ts).
   */
  NATS_URL: z
    .string()
    .regex(/^(nats|tls|wss?):\/\//, 'NATS_URL must start with nats://, tls://, ws:// or wss://')
    .optional(),
  /** `off` turns the log archive off although NATS_URL is set (the archiver reads the same). */
  LOG_ARCHIVE: z.enum(['on', 'off'], { error: 'LOG_ARCHIVE must be on or off' }).optional(),
  SANDBOX_ACL: SharedEnv.SANDBOX_ACL,
  /** The step-dispatcher's limit, passed to every agent so that it paces its output below it (agent-env.ts). */
  SANDBOX_REDIS_RATE_LIMIT: SharedEnv.SANDBOX_REDIS_RATE_LIMIT,
  LEASE_SECONDS: SharedEnv.LEASE_SECONDS,
  /** Sandboxes one replica starts concurrently (create + wait-ready are mostly waiting). */
  POD_LIFECYCLE_CONCURRENCY: intVar(1, 1000, 20),
  /** Sandboxes one replica tears down concurrently. */
  POD_LIFECYCLE_DESTROY_CONCURRENCY: intVar(1, 1000, 20),
  /**
   * Period of the disk budget check (Docker without a storage quota, in-process): a sandbox
   * writing at R bytes/s stops at most R × this (plus one measure) past its limit.
   */
  SANDBOX_DISK_CHECK_MS: intVar(200, 60_000, 2000),
  /**
   * The disk check's longest pause while no sandbox runs (it backs off from SANDBOX_DISK_CHECK_MS;
   * a sandbox this replica starts wakes it at once, one another replica starts is measured by that
   * replica's check).
   */
  SANDBOX_DISK_IDLE_MS: intVar(200, 600_000, 10_000),
  /** Time the agent gets to exit after its shutdown step before it is killed. */
  DESTROY_GRACE_SECONDS: intVar(0, 600, 10),
  COMPLETION_SHARDS: SharedEnv.COMPLETION_SHARDS,
  SANDSTREAM_INSTALLATION: SharedEnv.SANDSTREAM_INSTALLATION,
  /** How often sandboxes the step-dispatcher suspects (late heartbeat) are checked with the backend. */
  LIVENESS_PROBE_MS: intVar(100, 60_000, 1000),
  /** The longest pause of that check while nothing is suspect (it backs off from LIVENESS_PROBE_MS). */
  LIVENESS_PROBE_IDLE_MS: intVar(100, 60_000, 4000),
  /** Safety-net period of the sandbox user restore (it also runs on every reconnect). */
  SANDBOX_ACL_RESTORE_SECONDS: intVar(1, 3600, 30),
  /**
   * The templates file (the scheduler's): its `pool:` entries are the warm pools this service
   * keeps filled, and claims compare requests with them. Unset: no warm pools.
   */
  SANDSTREAM_TEMPLATES_FILE: z.string().optional(),
  /**
   * Unclaimed warm pool members of all pools together, across replicas. Unset: the sum of the
   * declared pools' `min`, so every pool can reach its min and none grows past it at another's cost.
   */
  SANDSTREAM_POOL_CAPACITY: z.coerce
    .number({ error: 'SANDSTREAM_POOL_CAPACITY must be a number' })
    .int('SANDSTREAM_POOL_CAPACITY must be an integer')
    .min(0, 'SANDSTREAM_POOL_CAPACITY must be at least 0')
    .max(100_000, 'SANDSTREAM_POOL_CAPACITY must be at most 100000')
    .optional(),
  /** Members one replica starts at once (beside, not inside, POOL_LIFECYCLE_CONCURRENCY). */
  POOL_REFILL_CONCURRENCY: intVar(1, 100, 2),
  /** How often the pools are checked (deadlines, heartbeats, refills, template changes). */
  POOL_KEEPER_INTERVAL_MS: intVar(100, 60_000, 1000),
  /**
   * A ready member's heartbeat must stay missing this long (as the keeper sees it) before the
   * member is retired: after a Redis restart its agent reconnects and sets it again, which takes
   * a few of its heartbeat periods (2 s) and the re-creation of its Redis user.
   */
  POOL_HEARTBEAT_GRACE_MS: intVar(0, 600_000, 15_000),
  /** A claimed member that does not come up as its job within this long is destroyed; the start goes cold. */
  POOL_CLAIM_TIMEOUT_SECONDS: intVar(1, 120, 10),
  /** Snapshots one tenant may hold (docs/snapshots.md, "Quotas"). */
  SNAPSHOT_MAX_COUNT_PER_TENANT: intVar(1, 1_000_000, 100),
  /** Stored (compressed) bytes of one tenant's snapshots together; default 20 GiB. */
  SNAPSHOT_MAX_BYTES_PER_TENANT: z.coerce
    .number({ error: 'SNAPSHOT_MAX_BYTES_PER_TENANT must be a number of bytes' })
    .int('SNAPSHOT_MAX_BYTES_PER_TENANT must be an integer')
    .min(1, 'SNAPSHOT_MAX_BYTES_PER_TENANT must be at least 1')
    .default(20 * 1024 ** 3),
  /** How long a snapshot is kept before the reaper deletes it; default 7 days. */
  SNAPSHOT_RETENTION_SECONDS: intVar(60, 10 * 365 * 24 * 3600, 7 * 24 * 3600),
  /** An upload not finished this long after it began is a dead one (its writer crashed): the reaper deletes it. */
  SNAPSHOT_UPLOAD_GRACE_SECONDS: intVar(10, 24 * 3600, 900),
  /** Snapshot captures and restores one replica runs at once. */
  SNAPSHOT_CONCURRENCY: intVar(1, 100, 4),
  /**
   * Bytes of its own captures a replica keeps on local disk (capture-cache.ts) so a fork placed
   * on it restores without reading the store back; 0 turns the cache off (captures then stream
   * straight to the store, the sandbox frozen meanwhile).
   */
  SNAPSHOT_CACHE_MAX_BYTES: intVar(0, 2 ** 50, 1024 ** 3),
  /** How long a kept capture is used; it is deleted after. */
  SNAPSHOT_CACHE_MAX_AGE_SECONDS: intVar(1, 24 * 3600, 300),
  /**
   * `on` (default): a fork's capture is also kept as a plain copy of the files, where the backend
   * can make one (in-process), and the forks placed on this replica restore by copying it
   * (local-copies.ts); `off`: they restore from the capture's stream. Needs the cache.
   */
  SNAPSHOT_FORK_COPY: z
    .enum(['on', 'off'], { error: 'SNAPSHOT_FORK_COPY must be on or off' })
    .optional()
    .default('on'),
  /** Where the cache lives (each replica its own directory below it); default the system's temp directory. */
  SNAPSHOT_CACHE_DIR: z.string().min(1, 'SNAPSHOT_CACHE_DIR must not be empty').optional(),
  /** CPU, memory and pids every sandbox gets unless its spec says otherwise, and the most it may ask. */
  ...ResourcePolicyEnvSchema.shape,
});
export type PodLifecycleEnv = z.output<typeof PodLifecycleEnvSchema>;

/**
 * The destroy's grace, kept to half a lease: the slot of a finished job is given back before its
 * sandbox is torn down (destroy-sandbox.ts), so for the length of a destroy that sandbox runs
 * outside the limit. Bounding the grace by the lease keeps that overlap no longer than a crashed
 * holder's slot would stay taken anyway.
 */
export function destroyGraceMs(
  env: Pick<PodLifecycleEnv, 'DESTROY_GRACE_SECONDS' | 'LEASE_SECONDS'>,
): number {
  return Math.min(env.DESTROY_GRACE_SECONDS, env.LEASE_SECONDS / 2) * 1000;
}
