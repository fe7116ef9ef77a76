import type { Redis } from 'ioredis';
import type { Logger } from './logger.js';

export interface HeartbeatOptions {
  redis: Redis;
  key: string;
  intervalMs: number;
  log: Logger;
  /** The step running right now, reported in the value so an operator can see what the agent is doing. */
  currentStepId: () => string | null;
  /** Told how each periodic write went (null: written), e.g. to notice refused credentials. */
  onWritten?: (err: Error | null) => void;
}

/**
 * `SET <key> <json> PX <3 x interval>`: the key exists exactly while the agent is alive. Three
 * intervals of TTL ride out one slow write without flapping.
 */
export class Heartbeat {
  private timer: NodeJS.Timeout | null = null;
  private inFlight = false;
  private stopped = false;

  constructor(private readonly options: HeartbeatOptions) {}

  get ttlMs(): number {
    return this.options.intervalMs * 3;
  }

  value(): string {
    return JSON.stringify({
      pid: process.pid,
      time: new Date().toISOString(),
      stepId: this.options.currentStepId(),
    });
  }

  /** Writes the first beat (awaited, so the agent is visible before it pops) and starts the interval. */
  async start(): Promise<void> {
    await this.beatOnce();
    // stop() may have been called while the first write waited for Redis.
    if (this.stopped) return;
    this.timer = setInterval(() => this.tick(), this.options.intervalMs);
    // The heartbeat alone must not keep the process alive once everything else has stopped.
    this.timer.unref();
  }

  private tick(): void {
    // While Redis is unreachable a SET would sit in the offline queue; queueing one per interval
    // would grow without bound during a long outage, so skip until the last one answered.
    if (this.inFlight) return;
    this.inFlight = true;
    this.beatOnce()
      .then(
        () => this.options.onWritten?.(null),
        (err: Error) => {
          this.options.log.warn('heartbeat write failed', { error: err.message });
          this.options.onWritten?.(err);
        },
      )
      .finally(() => {
        this.inFlight = false;
      });
  }

  private async beatOnce(): Promise<void> {
    await this.options.redis.set(this.options.key, this.value(), 'PX', this.ttlMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Stops beating and removes the key, so a clean exit is distinguishable from a crash at once. */
  async stopAndDelete(): Promise<void> {
    this.stop();
    await this.options.redis.del(this.options.key);
  }
}
