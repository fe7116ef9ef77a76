import type { Job, Queue, QueueEvents } from 'bullmq';
import { Cluster } from 'ioredis';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

const STALLED_REASON = 'job stalled more than allowable limit';
// How BullMQ's waitUntilFinished says its ttl passed with no finish event.
const TIMEOUT_PREFIX = 'Job wait ';

/**
 * A caller's side of work done where a sandbox's backend is (pod-lifecycle): it queues one
 * request on a BullMQ queue and waits for the processor's answer (its return value, or its
 * failure's message). Snapshot and network-policy requests both go this way, each on its own
 * queue so a quick one never waits behind a long one. Opened on first use.
 */
export class QueuedRequests {
  private queue: Queue | undefined;
  private events: QueueEvents | undefined;
  private eventsRedis: RedisClient | undefined;
  private opened: Promise<{ queue: Queue; events: QueueEvents }> | undefined;

  constructor(
    private readonly connection: RedisClient,
    private readonly keys: KeySpace,
    private readonly queueName: string,
  ) {}

  /** Queues `data` as a job named `name`; resolves to what the processor returned. */
  async send(name: string, data: unknown, timeoutMs: number): Promise<unknown> {
    this.opened ??= this.open();
    const { queue, events } = await this.opened;
    const job: Job = await queue.add(name, data);
    try {
      return await job.waitUntilFinished(events, timeoutMs);
    } catch (err) {
      // BullMQ's words for a job whose worker died and that its queue does not run again.
      if ((err as Error).message === STALLED_REASON) {
        throw new Error(
          `failed: the pod-lifecycle replica working on this ${name} request stopped before it finished ` +
            '(crashed or restarted); nothing was kept, so send the request again',
        );
      }
      if ((err as Error).message.startsWith(TIMEOUT_PREFIX))
        return this.afterTimeout(queue, job, name, timeoutMs);
      throw err;
    }
  }

  /**
   * No finish event came in time. The job's own state decides: its answer if it did finish (an
   * event can be missed across a reconnect of the events connection), else the request is taken
   * back while it still waits, so it is not applied later behind the caller's back.
   */
  private async afterTimeout(queue: Queue, job: Job, name: string, timeoutMs: number): Promise<unknown> {
    const now = await queue.getJob(job.id ?? '');
    const state = now ? await now.getState() : 'unknown';
    if (now && state === 'completed') return now.returnvalue;
    if (now && state === 'failed') throw new Error(now.failedReason);
    if (state === 'waiting' || state === 'delayed' || state === 'prioritized')
      await now?.remove().catch(() => {});
    throw new Error(
      `failed: no pod-lifecycle replica answered this ${name} request within ${Math.round(timeoutMs / 1000)} s ` +
        `(it was ${state === 'active' ? 'still being worked on' : `${state}, and is withdrawn`}); is pod-lifecycle running?`,
    );
  }

  private async open(): Promise<{ queue: Queue; events: QueueEvents }> {
    // Loaded here, on first use: a client that never asks (the CLI's exec, most SDK users) does
    // not pay for loading BullMQ at start (issue 33, CLI start-up).
    const { Queue, QueueEvents } = await import('bullmq');
    this.queue = new Queue(this.queueName, {
      connection: this.connection,
      prefix: this.keys.bullPrefix,
      defaultJobOptions: { removeOnComplete: { age: 600 }, removeOnFail: { age: 3600 }, attempts: 1 },
    });
    this.queue.on('error', () => {});
    // QueueEvents blocks on a connection of its own, which BullMQ wants without a retry limit.
    this.eventsRedis =
      this.connection instanceof Cluster
        ? this.connection.duplicate(undefined, { redisOptions: { maxRetriesPerRequest: null } })
        : this.connection.duplicate({ maxRetriesPerRequest: null });
    // Its failures reach QueueEvents' own 'error'; unheard here, ioredis prints each reconnect.
    this.eventsRedis.on('error', () => {});
    this.events = new QueueEvents(this.queueName, {
      connection: this.eventsRedis,
      prefix: this.keys.bullPrefix,
    });
    this.events.on('error', () => {});
    await this.events.waitUntilReady();
    return { queue: this.queue, events: this.events };
  }

  async close(): Promise<void> {
    await Promise.all([this.queue?.close(), this.events?.close()]);
    this.eventsRedis?.disconnect();
  }
}

/**
 * A processor's failure carried as its error message, `<code>: <message>`, so the caller can
 * throw the matching typed error: `failure` makes one, `parse` reads one back (an unknown code
 * reads as `failed`, which every list of codes has).
 */
export function codedFailures<const Code extends string>(codes: readonly (Code | 'failed')[]) {
  return {
    failure: (code: Code | 'failed', message: string): Error => new Error(`${code}: ${message}`),
    parse: (message: string): { code: Code | 'failed'; message: string } => {
      for (const code of codes) {
        if (message.startsWith(`${code}: `)) return { code, message: message.slice(code.length + 2) };
      }
      return { code: 'failed', message };
    },
  };
}
