import type { KeySpace, RedisClient } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import type { NatsSource } from './nats-link.js';

export interface LogArchiverOptions {
  /** Per-job commands (never blocking): reads, trims, leases, markers. */
  redis: RedisClient;
  /** A dedicated connection: discovery's XREADGROUP BLOCK on `events:lifecycle` holds it. */
  lifecycleRedis: RedisClient;
  keys: KeySpace;
  /** The current NATS connection, whichever it is after an outage (nats-link.ts). */
  nats: NatsSource;
  logger: Logger;
  /** This replica's name: lease owner and consumer in the discovery group. */
  consumer: string;
  /** First subject token (NATS_SUBJECT_PREFIX). */
  subjectPrefix?: string;
  /** JetStream retention of the archive stream. */
  maxAgeMs?: number;
  maxBytes?: number;
  /** Archived entries left in a job's Redis stream after trimming, for live followers. */
  keepEntries?: number;
  /** Jobs this replica archives at once. */
  maxJobs?: number;
  /** XREAD COUNT per poll; a full read means "busy": the job is polled again at once. */
  readCount?: number;
  /** Limits of one JetStream message. */
  batchEntries?: number;
  batchBytes?: number;
  /** How often an idle job's stream is polled. */
  idlePollMs?: number;
  /** A job lease lasts this long unless renewed; a dead replica's jobs move after it. */
  leaseMs?: number;
  /** Lease renewal and claiming of new jobs. */
  tickMs?: number;
  /**
   * A finished job whose agent still heart-beats may print a last line or two: its log is
   * completed once the heartbeat is gone, or this long after the end.
   */
  completeGraceMs?: number;
  /** Lifecycle entries another replica read but never acknowledged are taken over after this long. */
  claimIdleMs?: number;
  metrics?: { add(n: number, attrs: { what: 'entries' | 'gaps' | 'jobs' }): void };
}

/** What one replica's archiver did, for tests and /info. */
export interface ArchiveStats {
  entries: number;
  messages: number;
  gaps: number;
  completed: number;
  conflicts: number;
}

export type ArchiveMetrics = LogArchiverOptions['metrics'];
