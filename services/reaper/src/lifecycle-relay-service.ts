import { hostname } from 'node:os';
import type { KeySpace, RedisClient } from '@sandstream/bus';
import type { Logger, SandstreamMetrics } from '@sandstream/telemetry';
import { LifecycleRelay } from './lifecycle-relay.js';
import type { LogArchiveEnvConfig } from './log-archive-config.js';
import { LogArchiver } from './log-archiver.js';
import { NatsLink, type NatsLinkOptions } from './nats-link.js';

export interface RelayHostOptions {
  natsUrl: string;
  subjectPrefix: string;
  keys: KeySpace;
  /** A dedicated connection: the relay's XREADGROUP BLOCK holds it. */
  redis: RedisClient;
  logger: Logger;
  onShutdown(name: string, run: () => Promise<void>): void;
  /** Reconnect timing (tests); the defaults reconnect forever every ~2 s. */
  link?: Pick<NatsLinkOptions, 'reconnectWaitMs' | 'rebuildWaitMs' | 'maxRebuildWaitMs' | 'connectOptions'>;
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
  /** Readiness: NATS connected right now. */
  ready(): Promise<boolean>;
  /** Liveness: false only when NATS can no longer come back without a restart (/healthz fails). */
  live(): Promise<boolean>;
  archiver: LogArchiver | undefined;
  relay: LifecycleRelay;
  link: NatsLink;
}

/**
 * Connects to NATS (a link that reconnects forever: nats-link.ts) and runs the lifecycle relay and, unless LOG_ARCHIVE=off, the JetStream log
 * archiver, in whatever process hosts them: their own (relay-main.ts) or the reaper's (the
 * default when the reaper has NATS_URL). Both share one NATS connection.
 */
export async function startLifecycleRelay(options: RelayHostOptions): Promise<RelayHost> {
  // Not awaited: NATS down at start-up delays the relay and the archive, not the host's start.
  const nats = new NatsLink({
    url: options.natsUrl,
    name: 'sandstream-lifecycle-relay',
    logger: options.logger,
    ...options.link,
  });
  nats.start();
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
  options.onShutdown('nats', () => nats.close());
  return {
    ready: async () => nats.isConnected(),
    live: async () => nats.isRecoverable(),
    archiver,
    relay,
    link: nats,
  };
}
