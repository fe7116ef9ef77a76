import type { RedisClient } from '@sandstream/bus';
import { COMPLETION_GROUP, type DispatchKeys, sleep } from '@sandstream/bus';
import { PeriodicTask } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';
import { type CompletionNotice, decodeCompletionNotice } from '@sandstream/wire';
import { Cluster } from 'ioredis';
import { LatencyWindow } from './latency-window.js';

/**
 * How long a completion read blocks by default. A notice ends the block at once, and a stop
 * disconnects the reader, so the length costs nothing but the read loop's sign of life; each
 * timeout is a wake-up of its own, off the shared tick (Redis answers a timed-out block when its
 * own clock gets to it), so an idle dispatcher is woken once in 30 s instead of every 5 s (issue
 * 32 §3, part 4). As long as BullMQ's workers block (WORKER_DRAIN_DELAY_SECONDS).
 */
export const COMPLETION_BLOCK_MS = 30_000;

export type NoticeHandler = (notice: CompletionNotice) => Promise<void>;

export interface CompletionConsumerOptions {
  redis: RedisClient;
  keys: DispatchKeys;
  consumerName: string;
  handle: NoticeHandler;
  logger: Logger;
  /**
   * How long one XREADGROUP blocks (default COMPLETION_BLOCK_MS): an idle instance wakes this
   * often for it. A stop does not wait for it (the readers are disconnected).
   */
  blockMs?: number;
  batchSize?: number;
  /** A pending notice idle this long belongs to a dead (or stuck) consumer and is claimed. */
  claimIdleMs?: number;
  claimIntervalMs?: number;
  /** Called after every completed read (an empty one included): the read loop is alive. */
  onReadProgress?: () => void;
  /** Called after every completed claim pass. */
  onClaimProgress?: () => void;
}

type StreamReply = [key: string, entries: [id: string, fields: string[]][]][] | null;

/**
 * Reads the sharded completion streams with one consumer group shared by every dispatcher
 * instance, so each notice goes to one instance, and XAUTOCLAIMs notices left pending by an
 * instance that died. A notice is acknowledged (and deleted, so streams stay small) only after
 * its handler finished; handlers are idempotent, so a notice handled twice does no harm.
 *
 * Connections: on a single Redis one blocking connection reads every shard in one call; on a
 * cluster, where one XREADGROUP cannot span slots, one connection per shard. Either way the count
 * is fixed by configuration, not by the number of running jobs.
 */
export class CompletionConsumer {
  private readonly readers: RedisClient[] = [];
  private readonly loops: Promise<void>[] = [];
  private claimTask: PeriodicTask | undefined;
  private stopping = false;
  /** Aborted by stop(): a retry backoff ends at once instead of holding shutdown for up to 2 s. */
  private readonly stopped = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly blockMs: number;
  private readonly batchSize: number;
  private readonly claimIdleMs: number;
  private readonly claimIntervalMs: number;
  handledCount = 0;
  /**
   * Notice accepted by Redis (its stream id's time) -> handled here: what a step waits for the
   * dispatcher between its result and the next push. Uses Redis' clock and ours, so it is only
   * meaningful when they agree (same host, or NTP).
   */
  readonly latency = new LatencyWindow();

  constructor(private readonly options: CompletionConsumerOptions) {
    this.blockMs = options.blockMs ?? COMPLETION_BLOCK_MS;
    this.batchSize = options.batchSize ?? 200;
    this.claimIdleMs = options.claimIdleMs ?? 10_000;
    // A notice is claimable only after claimIdleMs: looking more often than half of that finds
    // nothing new (it used to be every 2 s: 2 XAUTOCLAIMs a second on an idle instance).
    this.claimIntervalMs = options.claimIntervalMs ?? Math.max(2_000, this.claimIdleMs / 2);
  }

  async start(): Promise<void> {
    const { redis, keys } = this.options;
    await this.ensureGroups();
    const groups = redis instanceof Cluster ? keys.allShards().map((s) => [s]) : [keys.allShards()];
    for (const shards of groups) {
      const reader = redis.duplicate();
      // A duplicate has no listeners: read failures are handled (and logged) by the loop.
      reader.on('error', () => {});
      this.readers.push(reader);
      this.loops.push(this.readLoop(reader, shards));
    }
    this.claimTask = new PeriodicTask(() => this.claimAll(), this.claimIntervalMs, {
      name: 'claim pending notices',
      logger: this.options.logger,
      ...(this.options.onClaimProgress ? { onProgress: this.options.onClaimProgress } : {}),
    });
    this.claimTask.start();
  }

  /**
   * Creates the consumer group on every shard (MKSTREAM: the stream may not exist yet). Run at
   * start and again whenever Redis answers NOGROUP: a Redis restarted without its data has lost
   * the groups, and without them every later completion would go unread.
   */
  async ensureGroups(): Promise<void> {
    const { redis, keys } = this.options;
    for (const shard of keys.allShards()) {
      try {
        await redis.xgroup('CREATE', keys.completionStream(shard), COMPLETION_GROUP, '0', 'MKSTREAM');
      } catch (err) {
        if (!(err instanceof Error) || !err.message.includes('BUSYGROUP')) throw err;
      }
    }
  }

  /** After a failure that may mean Redis lost its data: recreate the groups if that is it. */
  private async repairIfGroupMissing(err: unknown): Promise<void> {
    if (!(err instanceof Error) || !err.message.includes('NOGROUP')) return;
    this.options.logger.warn('completion consumer group missing (Redis lost its data?); recreating it');
    await this.ensureGroups();
  }

  private async readLoop(reader: RedisClient, shards: number[]): Promise<void> {
    const { keys, consumerName, logger } = this.options;
    const streams = shards.map((s) => keys.completionStream(s));
    let failures = 0;
    while (!this.stopping) {
      let reply: StreamReply;
      try {
        reply = (await reader.xreadgroup(
          'GROUP',
          COMPLETION_GROUP,
          consumerName,
          'COUNT',
          this.batchSize,
          'BLOCK',
          this.blockMs,
          'STREAMS',
          ...streams,
          ...streams.map(() => '>'),
        )) as StreamReply;
      } catch (err) {
        if (this.stopping) break;
        failures++;
        // One line per streak: a long outage must not flood the log.
        if (failures === 1) logger.warn({ err: (err as Error).message }, 'completion read failed; retrying');
        await this.repairIfGroupMissing(err).catch(() => undefined);
        await sleep(Math.min(250 * 2 ** Math.min(failures, 4), 2000), this.stopped.signal);
        continue;
      }
      if (failures > 0) logger.info({ failures }, 'completion reads work again');
      failures = 0;
      this.options.onReadProgress?.();
      if (!reply) continue;
      for (const [stream, entries] of reply) {
        try {
          await this.handleEntries(stream, entries);
        } catch (err) {
          // The acknowledgement failed (Redis went away mid-batch): the notices stay pending and
          // the claim pass hands them out again; handlers are idempotent.
          logger.warn({ err: (err as Error).message, stream }, 'acknowledging notices failed');
        }
      }
    }
  }

  private async handleEntries(stream: string, entries: [string, string[]][]): Promise<void> {
    const done: string[] = [];
    await Promise.all(
      entries.map(async ([id, fields]) => {
        const notice = decodeCompletionNotice(fields);
        if (!notice) {
          // Not ours to understand; acknowledging keeps it from being redelivered forever.
          this.options.logger.warn({ stream, id }, 'dropping malformed completion notice');
          done.push(id);
          return;
        }
        const work = this.options.handle(notice);
        this.inFlight.add(work);
        try {
          await work;
          done.push(id);
          this.handledCount++;
          this.latency.record(Date.now() - Number(id.split('-')[0]));
        } catch (err) {
          // Left pending: XAUTOCLAIM retries it after claimIdleMs.
          this.options.logger.error({ err, notice }, 'completion handler failed; will retry');
        } finally {
          this.inFlight.delete(work);
        }
      }),
    );
    if (done.length === 0) return;
    const { redis } = this.options;
    await Promise.all([redis.xack(stream, COMPLETION_GROUP, ...done), redis.xdel(stream, ...done)]);
  }

  /** Takes over notices another consumer read but never acknowledged (it crashed mid-handling). */
  private async claimAll(): Promise<void> {
    // Every shard at once: the auto-pipeline sends their first XAUTOCLAIMs in one write.
    const passes = await Promise.allSettled(
      this.options.keys.allShards().map((shard) => this.claimShard(shard)),
    );
    const failed = passes.find((pass) => pass.status === 'rejected');
    if (failed) throw failed.reason;
  }

  private async claimShard(shard: number): Promise<void> {
    const { redis, keys, consumerName, logger } = this.options;
    if (this.stopping) return;
    const stream = keys.completionStream(shard);
    let cursor = '0-0';
    try {
      for (let round = 0; round < 10; round++) {
        const reply = (await redis.xautoclaim(
          stream,
          COMPLETION_GROUP,
          consumerName,
          this.claimIdleMs,
          cursor,
          'COUNT',
          this.batchSize,
        )) as [string, [string, string[]][], string[]?];
        const [next, entries] = reply;
        const live = entries.filter((e): e is [string, string[]] => Array.isArray(e?.[1]));
        if (live.length > 0) {
          logger.info({ stream, count: live.length }, 'claimed pending completion notices');
          await this.handleEntries(stream, live);
        }
        if (next === '0-0') break;
        cursor = next;
      }
    } catch (err) {
      await this.repairIfGroupMissing(err);
      // Rejecting lets the periodic task back off and report the loop as failing.
      throw err;
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.stopped.abort();
    // A read blocked in Redis ends now rather than after its block time; a batch it was being
    // answered is left pending, and claimed by another instance as a crashed one's would be.
    for (const reader of this.readers) reader.disconnect();
    await this.claimTask?.stop();
    await Promise.allSettled(this.loops);
    await Promise.allSettled([...this.inFlight]);
    await Promise.allSettled(this.readers.map((r) => r.quit()));
  }
}
