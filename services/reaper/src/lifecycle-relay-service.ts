import { hostname } from 'node:os';
import { type KeySpace, natsUrlOptions, type RedisClient } from '@sandstream/bus';
import type { Logger, SandstreamMetrics } from '@sandstream/telemetry';
import { connect } from 'nats';
import { LifecycleRelay } from './lifecycle-relay.js';
import type { LogArchiveEnvConfig } from './log-archive-config.js';
import { LogArchiver } from './log-archiver.js';

export interface RelayHostOptions {
  natsUrl: string;
  subjectPrefix: string;
  keys: KeySpace;
  /** A dedicated connection: the relay's XREADGROUP BLOCK holds it. */
  redis: RedisClient;
  logger: Logger;
  onShutdown(name: string, run: () => Promise<void>): void;
  /**
   * The JetStream log archive, when on: its settings, a dedicated connection for its own
   * XREADGROUP BLOCK, and one for its per-job reads and trims.
   */
  logArchive?: {
    env: LogArchiveEnvConfig;
    lifecycleRedis: RedisClient;
    redis: RedisClient;
    metrics?: SandstreamMetrics['logArchive'];
  };
}

export interface RelayHost {
  /** Readiness of the NATS connection. */
  ready(): Promise<boolean>;
  archiver: LogArchiver | undefined;
}

/**
 * Connects to NATS and runs the lifecycle relay and, unless LOG_ARCHIVE=off, the JetStream log
 * archiver, in whatever process hosts them: their own (relay-main.ts) or the reaper's (the
 * default when the reaper has NATS_URL). Both share one NATS connection.
 */
export async function startLifecycleRelay(options: RelayHostOptions): Promise<RelayHost> {
  const nats = await connect({ ...natsUrlOptions(options.natsUrl), name: 'sandstream-lifecycle-relay' });
  const consumer = `${hostname()}-${process.pid}`;
  const relay = new LifecycleRelay({
    redis: options.redis,
    keys: options.keys,
    nats,
    logger: options.logger,
    subjectPrefix: options.subjectPrefix,
    consumer,
  });
  relay.start();
  options.onShutdown('lifecycle relay', () => relay.stop());
  let archiver: LogArchiver | undefined;
  const archive = options.logArchive;
  if (archive && archive.env.LOG_ARCHIVE === 'on') {
    archiver = new LogArchiver({
      redis: archive.redis,
      lifecycleRedis: archive.lifecycleRedis,
      keys: options.keys,
      nats,
      logger: options.logger,
      consumer,
      subjectPrefix: options.subjectPrefix,
      maxAgeMs: archive.env.LOG_ARCHIVE_MAX_AGE_SECONDS * 1000,
      maxBytes: archive.env.LOG_ARCHIVE_MAX_BYTES,
      keepEntries: archive.env.LOG_ARCHIVE_KEEP_ENTRIES,
      maxJobs: archive.env.LOG_ARCHIVE_MAX_JOBS,
      ...(archive.metrics ? { metrics: archive.metrics } : {}),
    });
    archiver.start();
    const running = archiver;
    options.onShutdown('log archiver', () => running.stop());
  }
  options.onShutdown('nats', () => nats.drain());
  return { ready: async () => !nats.isClosed(), archiver };
}
