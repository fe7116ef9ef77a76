import {
  CompletionShardsSchema,
  DEFAULT_COMPLETION_SHARDS,
  DEFAULT_NAMESPACE,
  RedisEnvSchema,
} from '@sandstream/bus';
import { formatIssues } from '@sandstream/wire';
import { z } from 'zod';

const ms = (name: string, min: number, max: number, fallback: number) =>
  z.coerce
    .number()
    .int(`${name} must be an integer number of milliseconds`)
    .min(min, `${name} is at least ${min}`)
    .max(max, `${name} is at most ${max}`)
    .default(fallback);

export const DispatcherEnvSchema = RedisEnvSchema.extend({
  /** Isolates every shared key and queue (tests run with a random one). */
  SANDSTREAM_NAMESPACE: z.string().default(DEFAULT_NAMESPACE),
  /** Must equal pod-lifecycle's, which picks the shard each agent notifies. */
  COMPLETION_SHARDS: CompletionShardsSchema.default(DEFAULT_COMPLETION_SHARDS),
  /** 0 picks a free port (printed in the log). */
  HEALTH_PORT: z.coerce.number().int().min(0).max(65535).default(8083),
  DISPATCH_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(64),
  STEP_GRACE_MS: ms('STEP_GRACE_MS', 0, 3_600_000, 10_000),
  DEADLINE_SWEEP_MS: ms('DEADLINE_SWEEP_MS', 10, 60_000, 250),
  // Heartbeat TTL (~6 s) + this interval stays under the 15 s in which a lost sandbox must be noticed,
  // while checking 10,000 running jobs costs 2,500 EXISTS/s instead of 5,000.
  HEARTBEAT_CHECK_MS: ms('HEARTBEAT_CHECK_MS', 100, 60_000, 4_000),
  /** A job is judged by its heartbeat only after this long in running (the agent just proved alive). */
  HEARTBEAT_GRACE_MS: ms('HEARTBEAT_GRACE_MS', 0, 600_000, 3_000),
  /** After (re)connecting to Redis, heartbeats are not judged for this long (agents reconnect, users are restored). */
  HEARTBEAT_RECONNECT_GRACE_MS: ms('HEARTBEAT_RECONNECT_GRACE_MS', 0, 600_000, 15_000),
  CLAIM_IDLE_MS: ms('CLAIM_IDLE_MS', 100, 3_600_000, 10_000),
  FINISHED_STATE_TTL_MS: ms('FINISHED_STATE_TTL_MS', 1_000, 7 * 24 * 3_600_000, 600_000),
  /** Consumer name in the completion group; unique per process by default. */
  CONSUMER_NAME: z.string().min(1).max(200).optional(),
});
export type DispatcherConfig = z.output<typeof DispatcherEnvSchema>;

/** Parses the environment; the error names each bad variable and its rule. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): DispatcherConfig {
  const parsed = DispatcherEnvSchema.safeParse(env);
  if (!parsed.success) throw new Error(`step-dispatcher configuration: ${formatIssues(parsed.error)}`);
  return parsed.data;
}
