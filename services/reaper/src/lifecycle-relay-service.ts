import { hostname } from 'node:os';
import type { KeySpace, RedisClient } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import { connect } from 'nats';
import { LifecycleRelay } from './lifecycle-relay.js';

export interface RelayHostOptions {
  natsUrl: string;
  subjectPrefix: string;
  keys: KeySpace;
  /** A dedicated connection: the relay's XREADGROUP BLOCK holds it. */
  redis: RedisClient;
  logger: Logger;
  onShutdown(name: string, run: () => Promise<void>): void;
}

/**
 * Connects to NATS and runs the lifecycle relay, in whatever process hosts it: its own
 * (relay-main.ts) or the reaper's (the default when the reaper has NATS_URL). Returns the
 * readiness check of the NATS connection.
 */
export async function startLifecycleRelay(options: RelayHostOptions): Promise<() => Promise<boolean>> {
  const nats = await connect({ servers: options.natsUrl, name: 'sandstream-lifecycle-relay' });
  const relay = new LifecycleRelay({
    redis: options.redis,
    keys: options.keys,
    nats,
    logger: options.logger,
    subjectPrefix: options.subjectPrefix,
    consumer: `${hostname()}-${process.pid}`,
  });
  relay.start();
  options.onShutdown('lifecycle relay', () => relay.stop());
  options.onShutdown('nats', () => nats.drain());
  return async () => !nats.isClosed();
}
