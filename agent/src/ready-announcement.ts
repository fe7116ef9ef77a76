import type { Redis } from 'ioredis';
import type { Logger } from './logger.js';

/**
 * PUBLISHes the agent's pid on its ready channel (wire keys `ready`), once, right after the first
 * heartbeat is written: pod-lifecycle subscribes to these and learns at once that the sandbox is
 * up, instead of polling the heartbeat key. Sent on the same connection just after the heartbeat
 * SET, so whoever hears it finds the heartbeat already there.
 *
 * Not awaited by the boot and never fatal: with nobody subscribed (a standalone agent) it reaches
 * no one, and a Redis user made before the channel was allowed answers NOPERM; either way the
 * heartbeat alone still tells a waiter (a slower fallback check reads it).
 */
export function announceReady(redis: Redis, channel: string, log: Logger): void {
  redis.publish(channel, String(process.pid)).catch((err: Error) => {
    log.debug('ready announcement not delivered', { error: err.message });
  });
}
