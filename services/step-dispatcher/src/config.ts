import { intVar, SharedEnv, serviceEnvSchema } from '@sandstream/service-kit';
import { z } from 'zod';

/** A duration in milliseconds within bounds (the error names the variable and the bound). */
const ms = intVar;

export const DispatcherEnvSchema = serviceEnvSchema(8083).extend({
  /** Must equal pod-lifecycle's, which picks the shard each agent notifies. */
  COMPLETION_SHARDS: SharedEnv.COMPLETION_SHARDS,
  DISPATCH_CONCURRENCY: intVar(1, 1000, 64),
  STEP_GRACE_MS: ms(0, 3_600_000, 10_000),
  /** Pause between deadline sweeps while a sweep finds a full batch due (a backlog). */
  DEADLINE_SWEEP_MS: ms(10, 60_000, 250),
  /**
   * The longest an idle loop rests: the deadline sweep (it sleeps until the earliest deadline,
   * and deadlines this instance sets wake it), and the Redis budget and rate monitors and the
   * heartbeat check, which read nothing while no job runs. A job another instance started (or a
   * deadline it set and did not live to sweep) is seen here within this long.
   */
  IDLE_RECHECK_MS: ms(100, 60_000, 5_000),
  // Heartbeat TTL (~6 s) + this interval stays under the 15 s in which a lost sandbox must be noticed,
  // while checking 10,000 running jobs costs 2,500 EXISTS/s instead of 5,000.
  HEARTBEAT_CHECK_MS: ms(100, 60_000, 4_000),
  /** A job is judged by its heartbeat only after this long in running (the agent just proved alive). */
  HEARTBEAT_GRACE_MS: ms(0, 600_000, 3_000),
  /**
   * A missing heartbeat makes the sandbox a suspect that pod-lifecycle checks with the backend;
   * without its answer within this long the sandbox is failed as lost (as when nothing checked).
   */
  HEARTBEAT_VERDICT_WAIT_MS: ms(0, 600_000, 10_000),
  /**
   * A sandbox that still runs while its agent is silent (starved of CPU, stopped) gets this much
   * more time before it is failed as lost all the same.
   */
  HEARTBEAT_LATE_MAX_MS: ms(0, 3_600_000, 300_000),
  /** After (re)connecting to Redis, heartbeats are not judged for this long (agents reconnect, users are restored). */
  HEARTBEAT_RECONNECT_GRACE_MS: ms(0, 600_000, 15_000),
  CLAIM_IDLE_MS: ms(100, 3_600_000, 10_000),
  /**
   * What one sandbox may keep in Redis, all its keys together (0 turns the check off). A busy
   * sandbox's events stream alone can reach ~160 MB (10,000 lines of 16 KiB), hence the default.
   */
  SANDBOX_REDIS_BUDGET_MB: intVar(0, 1_000_000, 256),
  /** How often Redis' used memory is read; growth by half a budget measures the sandboxes at once. */
  REDIS_BUDGET_CHECK_MS: ms(50, 60_000, 250),
  /** Sandboxes are measured (a SCAN of their keys) at least this often even while Redis does not grow. */
  REDIS_BUDGET_MEASURE_MS: ms(500, 3_600_000, 10_000),
  SANDBOX_REDIS_RATE_LIMIT: SharedEnv.SANDBOX_REDIS_RATE_LIMIT,
  /** How often Redis' command total is read (one INFO per master). */
  REDIS_RATE_CHECK_MS: ms(50, 60_000, 500),
  /** The time a sandbox's rate is averaged over: longer forgives bursts of output, shorter stops a flood sooner. */
  REDIS_RATE_WINDOW_MS: ms(100, 600_000, 2_000),
  FINISHED_STATE_TTL_MS: ms(1_000, 7 * 24 * 3_600_000, 600_000),
  /** The operator's cap on a live sandbox's lifetime; a request for longer gets this. */
  SANDBOX_MAX_LIFETIME_SECONDS: intVar(1, 7 * 24 * 3600, 24 * 3600),
  /** Consumer name in the completion group; unique per process by default. */
  CONSUMER_NAME: z.string().min(1).max(200).optional(),
});
export type DispatcherConfig = z.output<typeof DispatcherEnvSchema>;
