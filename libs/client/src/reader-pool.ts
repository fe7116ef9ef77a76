import type { RedisClient } from '@sandstream/bus';
import { Cluster } from 'ioredis';

/** Idle blocking readers kept for reuse; more are closed when released. */
const MAX_IDLE = 16;

/**
 * Blocking readers one client holds at most: a command followed beyond this waits for a reader
 * instead of opening connection after connection (1,000 concurrent execs would otherwise be
 * 1,000 connections from one client).
 */
export const MAX_READERS = 64;

/**
 * Connections for blocking stream reads (XREAD BLOCK), one per command being followed: a blocked
 * connection serves nobody else, so concurrent commands need their own. Reused instead of dialled
 * per command, which would add a connection set-up to every exec's round trip, and bounded.
 */
export class ReaderPool {
  private readonly idle: RedisClient[] = [];
  private readonly waiting: ((reader: RedisClient) => void)[] = [];
  private inUse = 0;
  private closed = false;

  constructor(
    private readonly redis: RedisClient,
    private readonly maxReaders: number = MAX_READERS,
  ) {}

  /** A reader, at once when one is free or may be opened, else when another is released. */
  async acquire(): Promise<RedisClient> {
    if (this.inUse >= this.maxReaders) {
      return new Promise((resolve) => this.waiting.push(resolve));
    }
    this.inUse += 1;
    return this.idle.pop() ?? this.fresh();
  }

  /**
   * A reader only when one is free or may be opened now, else undefined (never waits): for a
   * caller that would rather go on without one than queue for it.
   */
  tryAcquire(): RedisClient | undefined {
    if (this.inUse >= this.maxReaders) return undefined;
    this.inUse += 1;
    return this.idle.pop() ?? this.fresh();
  }

  /** Gives a reader back; `broken` (an aborted or failed read) closes it instead. */
  release(reader: RedisClient, broken = false): void {
    const usable = !broken && !this.closed && reader.status === 'ready';
    const next = this.waiting.shift();
    if (next) {
      // Handed straight to a waiting follower (a fresh one if this one cannot serve).
      if (!usable) reader.disconnect();
      next(usable ? reader : this.fresh());
      return;
    }
    this.inUse -= 1;
    if (!usable || this.idle.length >= MAX_IDLE) {
      reader.disconnect();
      return;
    }
    this.idle.push(reader);
  }

  close(): void {
    this.closed = true;
    for (const reader of this.idle.splice(0)) reader.disconnect();
  }

  private fresh(): RedisClient {
    const reader = blockingReader(this.redis);
    // Failed reads reject the caller's command; without a listener ioredis would print each
    // reconnect attempt as an "Unhandled error event".
    reader.on('error', () => {});
    return reader;
  }
}

/**
 * A new connection like `redis` for blocking reads. Without auto-pipelining: a blocking reader
 * has nothing to pipeline with, and the HTTP API turns it on for its connection, where it would
 * hold every read back to the next turn of the event loop.
 */
export function blockingReader(redis: RedisClient): RedisClient {
  const reader =
    redis instanceof Cluster
      ? redis.duplicate([], { enableAutoPipelining: false })
      : redis.duplicate({ enableAutoPipelining: false });
  // A failed read rejects its caller, who retries or reports it. Without a listener ioredis
  // printed "[ioredis] Unhandled error event" for every reconnect attempt while Redis restarted
  // (208 lines in one passing restart test).
  reader.on('error', () => {});
  return reader;
}
