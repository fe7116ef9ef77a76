import { sandboxKeys } from '@sandstream/wire';
import type { RedisClient } from './redis-connection.js';

/** Every tagged-style agent's ready channel (wire keys `ready`: `sandbox:{<jobId>}:ready`). */
const READY_PATTERN = sandboxKeys('*', 'tagged').ready;
const [READY_PREFIX, READY_SUFFIX] = READY_PATTERN.split('*') as [string, string];

/** The job id of a ready channel, or null for any other channel. */
export function jobIdOfReadyChannel(channel: string): string | null {
  if (!channel.startsWith(READY_PREFIX) || !channel.endsWith(READY_SUFFIX)) return null;
  const jobId = channel.slice(READY_PREFIX.length, -READY_SUFFIX.length);
  return jobId.length > 0 ? jobId : null;
}

/** One start's wait for its agent. */
export interface AnnouncementWait {
  /** True once the agent has announced itself (at once if it already has), false after `timeoutMs`. */
  next(timeoutMs: number): Promise<boolean>;
  /** Stops listening for this job; a pending next() resolves false. */
  close(): void;
}

class Waiter implements AnnouncementWait {
  announced = false;
  private wake: ((announced: boolean) => void) | null = null;

  constructor(private readonly onClose: (waiter: Waiter) => void) {}

  next(timeoutMs: number): Promise<boolean> {
    if (this.announced) return Promise.resolve(true);
    this.settle(false); // one caller at a time: an earlier next() still pending gives up
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => this.settle(false), timeoutMs);
      this.wake = (announced) => {
        clearTimeout(timer);
        this.wake = null;
        resolve(announced);
      };
    });
  }

  hear(): void {
    this.announced = true;
    this.settle(true);
  }

  settle(announced: boolean): void {
    this.wake?.(announced);
  }

  close(): void {
    this.onClose(this);
    this.settle(this.announced);
  }
}

/**
 * What agents announce when they start (agent/src/ready-announcement.ts), heard on one
 * pattern subscription per process: a start registers (expect) before it creates the sandbox and
 * then blocks on the announcement, so readiness costs no polling and no connection per start.
 *
 * Pub/sub keeps nothing for a subscriber that is away (a reconnect): callers pair next() with a
 * slower look at the heartbeat key, which a missed announcement cannot fool. ioredis
 * re-subscribes by itself after a reconnect.
 */
export class AgentAnnouncements {
  private readonly waiting = new Map<string, Set<Waiter>>();
  private subscribed: Promise<unknown> | undefined;

  /** `subscriber` is a dedicated connection: in subscriber mode it can send nothing else. */
  constructor(private readonly subscriber: RedisClient) {
    subscriber.on('pmessage', (_pattern: string, channel: string) => this.onAnnouncement(channel));
  }

  /** Subscribes (once); resolves when Redis confirmed, so no announcement after it is missed. */
  async start(): Promise<void> {
    // A PING first: a PSUBSCRIBE sent before the connection is ready turns it to subscriber mode
    // under ioredis' own ready check (INFO), which then fails.
    this.subscribed ??= this.subscriber.ping().then(() => this.subscriber.psubscribe(READY_PATTERN));
    await this.subscribed;
  }

  /** Starts listening for `jobId`'s agent; call before the sandbox is created, close() after. */
  expect(jobId: string): AnnouncementWait {
    const waiter = new Waiter((w) => {
      const set = this.waiting.get(jobId);
      set?.delete(w);
      if (set?.size === 0) this.waiting.delete(jobId);
    });
    const set = this.waiting.get(jobId) ?? new Set<Waiter>();
    set.add(waiter);
    this.waiting.set(jobId, set);
    return waiter;
  }

  /** Starts being waited for: how many (for tests and metrics). */
  get pending(): number {
    return this.waiting.size;
  }

  /** Unsubscribes; pending waits resolve false (their callers fall back to the heartbeat). */
  async close(): Promise<void> {
    for (const set of this.waiting.values()) for (const waiter of set) waiter.settle(false);
    if (this.subscribed) await this.subscriber.punsubscribe(READY_PATTERN).catch(() => undefined);
  }

  private onAnnouncement(channel: string): void {
    const jobId = jobIdOfReadyChannel(channel);
    if (jobId === null) return;
    for (const waiter of this.waiting.get(jobId) ?? []) waiter.hear();
  }
}
