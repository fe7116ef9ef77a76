import { InstallationEnvSchema, RedisEnvSchema } from '@sandstream/bus';
import { intVar, portVar } from '@sandstream/service-kit';
import { z } from 'zod';

export const ReaperEnvSchema = RedisEnvSchema.extend(InstallationEnvSchema.shape).extend({
  SANDSTREAM_NAMESPACE: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, 'letters, digits, "_", "." and "-"')
    .default('sandstream'),
  REAPER_INTERVAL_SECONDS: intVar(1, 86_400, 60),
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
  REAPER_PAUSE_MS: intVar(0, 10_000, 10),
  /** Look for orphaned sandboxes through the backend (off when this reaper cannot reach it). */
  REAPER_SANDBOXES: z.enum(['on', 'off'], { error: 'REAPER_SANDBOXES must be on or off' }).default('on'),
  SANDBOX_ACL: z
    .enum(['auto', 'on', 'off'], { error: 'SANDBOX_ACL must be auto, on or off' })
    .default('auto'),
  /** Only job ids matching this glob (`*` only): lets reapers split the key space, and tests stay in their lane. */
  REAPER_JOB_GLOB: z
    .string()
    .regex(/^[A-Za-z0-9._:*-]+$/, 'REAPER_JOB_GLOB may contain job-id characters and *')
    .default('*'),
  LEASE_SECONDS: intVar(5, 3600, 60),
  COMPLETION_SHARDS: intVar(1, 1024, 8),
  /** When set, this process also relays `events:lifecycle` to NATS (see lifecycle-relay.ts). */
  NATS_URL: z
    .string()
    .regex(/^(nats|tls|wss?):\/\//, 'NATS_URL must start with nats://, tls://, ws:// or wss://')
    .optional(),
  /** First subject token of relayed events. */
  NATS_SUBJECT_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/, 'one subject token: letters, digits, _ and -')
    .default('sandstream'),
  HEALTH_PORT: portVar(8084),
});
export type ReaperEnv = z.output<typeof ReaperEnvSchema>;
