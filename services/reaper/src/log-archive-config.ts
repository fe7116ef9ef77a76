import { intVar } from '@sandstream/service-kit';
import { z } from 'zod';

const DAY = 86_400;
const GIB = 1024 ** 3;

/**
 * The JetStream log archive's variables, read wherever the lifecycle relay runs (the reaper with
 * NATS_URL, or relay-main.ts). The archive is on by default whenever NATS_URL is set.
 */
export const LogArchiveEnv = {
  LOG_ARCHIVE: z.enum(['on', 'off'], { error: 'LOG_ARCHIVE must be on or off' }).default('on'),
  /** JetStream drops a job's archived output this long after it was written. */
  LOG_ARCHIVE_MAX_AGE_SECONDS: intVar(60, 10 * 365 * DAY, 7 * DAY),
  /** The whole archive (every job of the namespace); the oldest messages go first beyond it. */
  LOG_ARCHIVE_MAX_BYTES: intVar(1024 ** 2, 2 ** 50, 10 * GIB),
  /**
   * Archived entries left in a job's Redis stream after trimming, for live followers that lag a
   * little. Below the agent's high-water mark (8000), or the agent would stall on them.
   */
  LOG_ARCHIVE_KEEP_ENTRIES: intVar(0, 7000, 2000),
  /** Jobs one replica archives at once; the others take the rest. */
  LOG_ARCHIVE_MAX_JOBS: intVar(1, 100_000, 2000),
  /**
   * How long past the reaper's retention a finished job whose log is still not archived keeps its
   * Redis keys (NATS down): then they go, and the loss is logged.
   */
  LOG_ARCHIVE_HOLD_SECONDS: intVar(0, 365 * DAY, DAY),
} as const;

export const LogArchiveEnvSchema = z.object(LogArchiveEnv);
export type LogArchiveEnvConfig = z.output<typeof LogArchiveEnvSchema>;
