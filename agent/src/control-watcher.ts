import type { ControlMessage } from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { decodeControlMessage } from './full-wire.js';
import type { Logger } from './logger.js';

export interface ControlWatcherOptions {
  /** A connection of its own: BRPOP holds it while waiting. */
  redis: Redis;
  key: string;
  log: Logger;
  onMessage: (message: ControlMessage) => void;
  /** How long one BRPOP waits; the loop re-checks `stopped` between pops. */
  popTimeoutSeconds?: number;
}

/**
 * Pops `:control` for the agent's whole life, on its own connection, so that a cancel is seen
 * the moment it is pushed (well within 1 s) whatever the main loop is doing. Messages that are
 * malformed are logged and discarded; deciding whether a cancel matches the running step is
 * the caller's job.
 */
export class ControlWatcher {
  private stopped = false;
  private loop: Promise<void> | null = null;

  constructor(private readonly options: ControlWatcherOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  private async run(): Promise<void> {
    const { redis, key, log, onMessage } = this.options;
    const timeout = this.options.popTimeoutSeconds ?? 5;
    let failing = false;
    while (!this.stopped) {
      let popped: [string, string] | null;
      try {
        popped = await redis.brpop(key, timeout);
        failing = false;
      } catch (err) {
        if (this.stopped) return;
        // A connection-level failure is retried by ioredis; anything else (e.g. WRONGTYPE because
        // someone wrote a string there, or WRONGPASS while Redis restarts without our user) must
        // not spin, so back off briefly — and log once per streak, not every half second.
        if (!failing) log.warn('control pop failed', { key, error: (err as Error).message });
        failing = true;
        await new Promise((resolve) => setTimeout(resolve, 500));
        continue;
      }
      if (!popped) continue;
      const decoded = await decodeControlMessage(popped[1]);
      if (!decoded.ok) {
        log.warn('ignoring malformed control message', { key, error: decoded.error });
        continue;
      }
      try {
        onMessage(decoded.value);
      } catch (err) {
        log.error('control handler failed', { error: (err as Error).message });
      }
    }
  }

  /**
   * Asks the loop to end and returns a promise for its end. The flag is set before returning,
   * so the caller can then close the connection to end a pending BRPOP at once.
   */
  stop(): Promise<void> {
    this.stopped = true;
    return this.loop ?? Promise.resolve();
  }
}
