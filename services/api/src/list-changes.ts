import {
  decodeJobEventFields,
  decodeRecordChangeFields,
  type JobRecord,
  type KeySpace,
  type RedisClient,
} from '@sandstream/bus';
import type { SandstreamClient } from '@sandstream/client';

/**
 * The changes a list shows (a record created, changed, removed), read from `events:lifecycle`:
 * every transition's JobEvent and the RecordChanges the services write beside them (a sandbox
 * ready, pausing, closing; a record removed). One tail of the stream per API replica, shared by
 * every list subscriber on it: one blocking connection and one read of each changed record,
 * however many consoles watch. The subscribers filter (tenant, kind) and write; the tail never
 * waits for one of them, so a slow one cannot hold the others back (list-events.ts drops it).
 */

export interface ListChange {
  /** The lifecycle entry's id: the event's id, which a client sends back as Last-Event-ID. */
  id: string;
  jobId: string;
  /** Whose: the record's tenant, or the entry's when the record is gone (undefined: not known). */
  tenant: string | undefined;
  type: 'created' | 'changed' | 'removed';
  /** The record as read after the entry (null: gone, whatever the entry said). */
  record: JobRecord | null;
}

export type ChangeListener = (changes: readonly ListChange[]) => void;

/** Entries read per XREAD / XRANGE. */
const PAGE = 200;
/** How long one XREAD waits (the tail checks whether it should stop in between). */
const BLOCK_MS = 5_000;
/** After a failed read, the tail tries again this much later (Redis away: it reconnects). */
const RETRY_MS = 1_000;

/** Stream entry ids compared as numbers (`ms-seq`): negative, zero or positive. */
export function compareIds(a: string, b: string): number {
  const [am = 0n, as = 0n] = a.split('-').map(BigInt);
  const [bm = 0n, bs = 0n] = b.split('-').map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  return as === bs ? 0 : as < bs ? -1 : 1;
}

/** The id of the stream's newest entry, or `0-0` when it has none. */
export async function lastLifecycleId(redis: RedisClient, keys: KeySpace): Promise<string> {
  const newest = await redis.xrevrange(keys.lifecycleStream, '+', '-', 'COUNT', 1);
  return newest[0]?.[0] ?? '0-0';
}

/**
 * Whether every entry after `cursor` is still in the stream. MAXLEN trims from the oldest end,
 * so they are while the cursor's own entry is (Redis 7.0 does not count trimmed entries in
 * XINFO's max-deleted-entry-id). A cursor of `0-0` (the list was read while the stream was
 * empty) is whole while nothing was ever removed. Conservative: a cursor that names no entry
 * (an XDEL, a made-up id) reads as not held, and the client reads its list again.
 */
export async function heldSince(redis: RedisClient, keys: KeySpace, cursor: string): Promise<boolean> {
  const stream = keys.lifecycleStream;
  if (cursor !== '0-0') return (await redis.xrange(stream, cursor, cursor)).length === 1;
  let info: unknown[];
  try {
    info = (await redis.call('XINFO', 'STREAM', stream)) as unknown[];
  } catch {
    return true; // no stream yet: nothing was ever removed
  }
  const field = (name: string) => Number(info[info.indexOf(name) + 1]);
  return field('entries-added') === field('length');
}

/** The changes of a page of lifecycle entries, each with its record read once. */
export async function changesOf(
  client: SandstreamClient,
  entries: readonly [string, string[]][],
): Promise<ListChange[]> {
  const named: { id: string; jobId: string; tenant: string | undefined; type: ListChange['type'] }[] = [];
  for (const [id, fields] of entries) {
    const event = decodeJobEventFields(fields);
    if (event) {
      named.push({
        id,
        jobId: event.jobId,
        tenant: event.tenant,
        type: event.type === 'created' ? 'created' : 'changed',
      });
      continue;
    }
    const change = decodeRecordChangeFields(fields);
    if (change)
      named.push({
        id,
        jobId: change.jobId,
        tenant: change.tenant,
        type: change.what === 'removed' ? 'removed' : 'changed',
      });
  }
  const ids = [...new Set(named.map((n) => n.jobId))];
  const records = new Map(await Promise.all(ids.map(async (id) => [id, await client.get(id)] as const)));
  return named.map((n) => {
    const record = records.get(n.jobId) ?? null;
    // A record read as gone is removed, whatever its entry said; one still there after a
    // `removed` entry (a repeat, or an id used again) is shown as it is.
    const type = record === null ? 'removed' : n.type === 'removed' ? 'changed' : n.type;
    return { ...n, type, tenant: record?.tenant ?? n.tenant, record };
  });
}

/** One running tail: its own connection, and the id it has read up to. */
interface Tail {
  connection: RedisClient;
  position: string;
  stopped: boolean;
  started: Promise<void>;
}

export interface ListChangeHubOptions {
  client: SandstreamClient;
  redis: RedisClient;
  keys: KeySpace;
  onError?: (err: unknown) => void;
}

/**
 * The replica's tail of `events:lifecycle`, running while anyone subscribes: started by the
 * first subscriber, stopped (its connection closed) with the last.
 */
export class ListChangeHub {
  private readonly listeners = new Set<ChangeListener>();
  private tail: Tail | undefined;

  constructor(private readonly options: ListChangeHubOptions) {}

  /**
   * Adds a listener of every change read from now on. `position`: the newest entry id before
   * them, so that a subscriber resuming from an older cursor reads the entries in between
   * itself (XRANGE) and misses none.
   */
  async subscribe(listener: ChangeListener): Promise<{ position: string; unsubscribe: () => void }> {
    const tail = this.tail ?? this.start();
    await tail.started;
    this.listeners.add(listener);
    return {
      position: tail.position,
      unsubscribe: () => {
        if (!this.listeners.delete(listener) || this.listeners.size > 0 || this.tail !== tail) return;
        this.stop();
      },
    };
  }

  /** Stops the tail (the app closes). */
  close(): void {
    this.listeners.clear();
    this.stop();
  }

  private stop(): void {
    const tail = this.tail;
    if (!tail) return;
    this.tail = undefined;
    tail.stopped = true;
    // Ends the blocked XREAD at once (it rejects, and the loop sees `stopped`).
    tail.connection.disconnect();
  }

  private start(): Tail {
    const { redis, keys } = this.options;
    const connection = redis.duplicate();
    // Errors are the connection's (it reconnects by itself); a read that fails is retried below.
    connection.on('error', () => {});
    const tail: Tail = { connection, position: '0-0', stopped: false, started: Promise.resolve() };
    // The position is read before the first XREAD, not `$`: an entry written between a
    // subscriber's arrival and that XREAD is read too.
    tail.started = lastLifecycleId(redis, keys).then((id) => {
      tail.position = id;
      void this.run(tail);
    });
    tail.started.catch(() => {
      if (this.tail === tail) this.stop();
    });
    this.tail = tail;
    return tail;
  }

  private async run(tail: Tail): Promise<void> {
    const { keys, client } = this.options;
    while (!tail.stopped) {
      try {
        const reply = (await tail.connection.xread(
          'COUNT',
          PAGE,
          'BLOCK',
          BLOCK_MS,
          'STREAMS',
          keys.lifecycleStream,
          tail.position,
        )) as [string, [string, string[]][]][] | null;
        const entries = reply?.[0]?.[1] ?? [];
        if (entries.length === 0 || tail.stopped) continue;
        const changes = await changesOf(client, entries);
        tail.position = entries[entries.length - 1]?.[0] ?? tail.position;
        if (tail.stopped) return;
        for (const listener of [...this.listeners]) listener(changes);
      } catch (err) {
        if (tail.stopped) return;
        this.options.onError?.(err);
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
  }
}
