import { decodeJobEventFields, type KeySpace, type RedisClient } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import { headers } from 'nats';
import type { NatsSource } from './nats-link.js';

export interface LifecycleRelayOptions {
  /** A dedicated connection: XREADGROUP BLOCK holds it. */
  redis: RedisClient;
  keys: KeySpace;
  /** The current NATS connection, whichever it is after an outage (nats-link.ts). */
  nats: NatsSource;
  logger: Logger;
  /** Subjects are `<subjectPrefix>.<namespace>.lifecycle.<tenant>.<state>`. */
  subjectPrefix?: string;
  /** Consumer group on `events:lifecycle`; replicas in one group share the work. */
  group?: string;
  consumer: string;
  batch?: number;
  blockMs?: number;
  /** Entries another consumer read but never acknowledged are taken over after this long. */
  claimIdleMs?: number;
}

type StreamReply = [string, [string, string[]][]][] | null;

/**
 * Publishes every entry of `events:lifecycle` to NATS, at least once. The Redis stream stays the
 * source of truth (written atomically with each transition); this relay reads it with a consumer
 * group, publishes, flushes, and only then acknowledges, so a crash between the two re-publishes
 * rather than loses. Each message carries `Nats-Msg-Id` = the stream entry id, so a JetStream
 * stream bound to these subjects drops the duplicates; plain subscribers may see a repeat after
 * a crash. Entries a dead replica read but never acknowledged are claimed by the others.
 */
export class LifecycleRelay {
  private readonly controller = new AbortController();
  private loop: Promise<void> | undefined;
  published = 0;

  constructor(private readonly options: LifecycleRelayOptions) {}

  private get group(): string {
    return this.options.group ?? 'nats-relay';
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
  }

  private async ensureGroup(): Promise<void> {
    try {
      // `$`: relay what happens from now on; the stream's earlier history is readable in Redis.
      await this.options.redis.xgroup(
        'CREATE',
        this.options.keys.lifecycleStream,
        this.group,
        '$',
        'MKSTREAM',
      );
    } catch (err) {
      if (!(err instanceof Error) || !err.message.includes('BUSYGROUP')) throw err;
    }
  }

  private async run(): Promise<void> {
    const signal = this.controller.signal;
    while (!signal.aborted) {
      try {
        await this.ensureGroup();
        // Own entries left unacknowledged by an earlier life of this consumer come first.
        await this.drain('0');
        while (!signal.aborted) {
          await this.claimStale();
          await this.drain('>');
        }
      } catch (err) {
        if (signal.aborted) break;
        this.options.logger.warn({ err: (err as Error).message }, 'lifecycle relay error; retrying');
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  /** Reads one batch (blocking for new entries when id is `>`) and relays it. */
  private async drain(id: '0' | '>'): Promise<void> {
    const { redis, keys } = this.options;
    const reply = (await redis.call(
      'XREADGROUP',
      'GROUP',
      this.group,
      this.options.consumer,
      'COUNT',
      String(this.options.batch ?? 100),
      ...(id === '>' ? ['BLOCK', String(this.options.blockMs ?? 1000)] : []),
      'STREAMS',
      keys.lifecycleStream,
      id,
    )) as StreamReply;
    const entries = reply?.[0]?.[1] ?? [];
    await this.relay(entries);
  }

  private async claimStale(): Promise<void> {
    const { redis, keys } = this.options;
    const [, entries] = (await redis.call(
      'XAUTOCLAIM',
      keys.lifecycleStream,
      this.group,
      this.options.consumer,
      String(this.options.claimIdleMs ?? 30_000),
      '0',
      'COUNT',
      String(this.options.batch ?? 100),
    )) as [string, [string, string[]][]];
    await this.relay(entries.filter((e) => e !== null && e[1] !== null));
  }

  private async relay(entries: [string, string[]][]): Promise<void> {
    if (entries.length === 0) return;
    const { keys } = this.options;
    // Asked for each batch: after a connection closed for good, the next one is a new object.
    const nats = await this.options.nats.connection(this.controller.signal);
    const prefix = this.options.subjectPrefix ?? 'sandstream';
    for (const [entryId, fields] of entries) {
      const event = decodeJobEventFields(fields);
      if (!event) continue; // not ours to understand: acknowledged below, never retried forever
      const h = headers();
      h.set('Nats-Msg-Id', `${keys.namespace}:${entryId}`);
      h.set('Sandstream-Job-Id', event.jobId);
      const state = event.type === 'cancel-requested' ? 'cancel-requested' : event.to;
      nats.publish(`${prefix}.${keys.namespace}.lifecycle.${event.tenant}.${state}`, JSON.stringify(event), {
        headers: h,
      });
    }
    // Acknowledge only what the server has received.
    await nats.flush();
    await this.options.redis.xack(keys.lifecycleStream, this.group, ...entries.map(([id]) => id));
    this.published += entries.length;
  }
}
