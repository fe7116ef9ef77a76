import { intVar, SharedEnv, serviceEnvSchema } from '@sandstream/service-kit';
import { z } from 'zod';
import { LifecycleRelayEnv } from './lifecycle-relay-config.js';
import { LogArchiveEnv } from './log-archive-config.js';

export const ReaperEnvSchema = serviceEnvSchema(8084).extend({
  REAPER_INTERVAL_SECONDS: intVar(1, 86_400, 60),
  /**
   * How often a pass walks every job record and key (the safety net for records missing from the
   * state indexes, and for keys without a record); the passes between read only what is due.
   */
  REAPER_FULL_SCAN_SECONDS: intVar(1, 7 * 86_400, 3600),
  /** How long a finished job's record, events and results stay readable. */
  REAPER_RETENTION_SECONDS: intVar(0, 365 * 86_400, 86_400),
  /** Keys without a job record must be idle this long before they are removed. */
  REAPER_ORPHAN_GRACE_SECONDS: intVar(1, 7 * 86_400, 600),
  /** A finished job's sandbox / Redis user left this long after the end counts as orphaned. */
  REAPER_SANDBOX_GRACE_SECONDS: intVar(0, 86_400, 120),
  REAPER_STARTING_TIMEOUT_SECONDS: intVar(10, 86_400, 900),
  REAPER_HEARTBEAT_GRACE_SECONDS: intVar(5, 86_400, 300),
  /** The reaper fails running jobs whose agent is gone only when no step-dispatcher has been alive this long. */
  REAPER_DISPATCHER_ABSENT_SECONDS: intVar(5, 86_400, 120),
  REAPER_SCAN_COUNT: intVar(10, 10_000, 200),
  /**
   * The operator's cap on how long a paused sandbox is kept (its spec's pausedRetentionSeconds,
   * default 7 days, applies below it): past it the reaper closes it and discards its files.
   */
  SANDBOX_MAX_PAUSED_RETENTION_SECONDS: intVar(60, 90 * 86_400, 30 * 86_400),
  REAPER_PAUSE_MS: intVar(0, 10_000, 10),
  /** Look for orphaned sandboxes through the backend (off when this reaper cannot reach it). */
  REAPER_SANDBOXES: z.enum(['on', 'off'], { error: 'REAPER_SANDBOXES must be on or off' }).default('on'),
  SANDBOX_ACL: SharedEnv.SANDBOX_ACL,
  SANDSTREAM_INSTALLATION: SharedEnv.SANDSTREAM_INSTALLATION,
  /** Only job ids matching this glob (`*` only): lets reapers split the key space, and tests stay in their lane. */
  REAPER_JOB_GLOB: z
    .string()
    .regex(/^[A-Za-z0-9._:*-]+$/, 'REAPER_JOB_GLOB may contain job-id characters and *')
    .default('*'),
  COMPLETION_SHARDS: SharedEnv.COMPLETION_SHARDS,
  /** When NATS_URL is set, this process also runs the lifecycle relay (relay-main.ts runs it alone). */
  ...LifecycleRelayEnv,
  NATS_URL: LifecycleRelayEnv.NATS_URL.optional(),
  /**
   * With NATS_URL: chunk groups of a snapshot upload that no object names are purged once they
   * stayed so this long (an upload killed mid-way); pod-lifecycle's setting of the same name
   * decides when an unfinished upload's record expires.
   */
  SNAPSHOT_UPLOAD_GRACE_SECONDS: intVar(10, 24 * 3600, 900),
  /** With NATS_URL, also the JetStream log archive (on unless LOG_ARCHIVE=off). */
  ...LogArchiveEnv,
});
export type ReaperEnv = z.output<typeof ReaperEnvSchema>;
