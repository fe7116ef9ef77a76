import type { RedisClient } from '@sandstream/bus';

/** Idle blocking readers kept for reuse; more are closed when released. */
const MAX_IDLE = 16;

/**
 * Connections for blocking stream reads (XREAD BLOCK), one per command being followed: a blocked
 * connection serves nobody else, so concurrent commands need their own. Reused instead of dialled
 * per command, which would add a connection set-up to every exec's round trip.
 */
export class ReaderPool {
  private readonly idle: RedisClient[] = [];
  private closed = false;

  constructor(private readonly redis: RedisClient) {}

  acquire(): RedisClient {
    const reader = this.idle.pop();
    if (reader) return reader;
    const fresh = this.redis.duplicate();
    // Failed reads reject the caller's command; without a listener ioredis would print each
    // reconnect attempt as an "Unhandled error event".
    fresh.on('error', () => {});
    return fresh;
  }

  /** Gives a reader back; `broken` (an aborted or failed read) closes it instead. */
  release(reader: RedisClient, broken = false): void {
    if (broken || this.closed || this.idle.length >= MAX_IDLE || reader.status !== 'ready') {
      reader.disconnect();
      return;
    }
    this.idle.push(reader);
  }

  close(): void {
    this.closed = true;
    for (const reader of this.idle.splice(0)) reader.disconnect();
  }
}
