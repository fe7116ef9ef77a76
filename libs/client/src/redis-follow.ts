import { isTerminal, JobField, type JobState, type KeySpace, type RedisClient, sleep } from '@sandstream/bus';
import type { FollowOptions } from './client-options.js';
import { followBackoffMs } from './follow-backoff.js';
import { resumePoint } from './follow-cursor.js';
import { decodeFollowEntries, type FollowItem } from './follow-entry.js';
import { isTransientRedisError, JobNotFoundError } from './job-not-found.js';
import { blockingReader } from './reader-pool.js';
import { TimelineGaps } from './timeline-gaps.js';
import { vouchedEntries } from './vouched-entries.js';

/** How long a blocking read waits before re-checking the record (covers a trimmed stream). */
const BLOCK_MS = 1000;
/** Stream entries a follower reads per round trip. */
const FOLLOW_PAGE = 500;

/**
 * A job's timeline read from its events stream (client.follow over Redis): state changes, step
 * boundaries, output lines, from the start or after `from`; ends after the terminal state. Uses
 * its own connection for the blocking reads, so several follows can run at once; rides through a
 * Redis outage (reads retried with backoff up to 2 s apart) unless `outageLimitMs` says otherwise.
 */
export async function* followJobStream(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
  options: FollowOptions,
): AsyncGenerator<FollowItem, void, undefined> {
  for await (const page of followJobPages(redis, keys, jobId, options)) for (const item of page) yield item;
}

/**
 * followJobStream a page at a time: the items of one stream read (up to FOLLOW_PAGE entries)
 * together, the same items in the same order. For a reader that forwards them in bulk (the HTTP
 * API writes one page in one socket write) and would otherwise pay an await per item. The next
 * page is asked for while this one is decoded and handed on.
 */
export async function* followJobPages(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
  options: FollowOptions,
): AsyncGenerator<FollowItem[], void, undefined> {
  const stream = keys.sandbox(jobId).events;
  // untilNow: where the stream ends as this follow starts; nothing after it is read. Asked before
  // the reader opens: a job not found here must leave no connection behind (it kept the
  // caller's process alive after client.close()).
  const until = options.untilNow ? await streamEnd(redis, keys, jobId) : undefined;
  if (until === null) return;
  const reader = blockingReader(redis);
  // Connection errors surface as rejected reads, retried below; without a listener ioredis
  // would print each reconnect attempt as an "Unhandled error event".
  reader.on('error', () => {});
  const abort = () => reader.disconnect();
  options.signal?.addEventListener('abort', abort, { once: true });
  // A cursor inside a packed entry reads that entry again and skips what was seen of it.
  const resume = resumePoint(options.from ?? '0-0');
  let partial = resume.partial;
  let cursor = resume.after;
  // Resuming from a cursor means the job was seen; otherwise the first entry proves it.
  let seen = options.from !== undefined;
  const gaps = new TimelineGaps({ from: options.from });
  let failures = 0;
  let outageSince: number | undefined;
  type Reply = [string, [string, string[]][]][] | null;
  const read = (after: string) =>
    reader.xread('COUNT', FOLLOW_PAGE, 'BLOCK', BLOCK_MS, 'STREAMS', stream, after) as Promise<Reply>;
  /** The next page, asked for while this one is decoded and handed on (a full page: more may wait). */
  let ahead: Promise<Reply> | undefined;
  try {
    while (!options.signal?.aborted) {
      if (until !== undefined && !isAfter(until, cursor)) return;
      let reply: Reply;
      let entries: [string, string[]][];
      let state: string | null = null;
      try {
        const next = ahead ?? read(cursor);
        ahead = undefined;
        reply = await next;
        entries = reply?.[0]?.[1] ?? [];
        if (entries.length === 0) state = await redis.hget(keys.job(jobId), JobField.state);
        // States only as the services wrote them: the sandbox may write this stream too.
        else entries = await vouchedEntries(redis, keys, jobId, entries);
        failures = 0;
        outageSince = undefined;
      } catch (err) {
        if (options.signal?.aborted) return;
        if (!isTransientRedisError(err)) throw err;
        outageSince ??= Date.now();
        if (options.outageLimitMs !== undefined && Date.now() - outageSince >= options.outageLimitMs)
          throw err;
        failures++;
        await sleep(followBackoffMs(failures), options.signal);
        continue;
      }
      if (entries.length > 0) seen = true;
      if (entries.length === FOLLOW_PAGE && !(until !== undefined && isAfter(lastId(entries), until))) {
        ahead = read(lastId(entries));
        // Awaited on the next round; one left behind (the job ended, the reader closed) is dropped.
        ahead.catch(() => {});
      }
      const page: FollowItem[] = [];
      let ended = false;
      for (const [id, fields] of entries) {
        if (until !== undefined && isAfter(id, until)) {
          ended = true;
          break;
        }
        cursor = id;
        let decodedItems = decodeFollowEntries(id, fields);
        if (partial) {
          if (partial.entry === id) decodedItems = decodedItems.slice(partial.skip);
          partial = undefined;
        }
        for (const decoded of decodedItems) {
          if (options.statesOnly && decoded.type !== 'state') continue;
          for (const item of gaps.accept(decoded)) page.push(item);
          if (decoded.type === 'state' && decoded.terminal) ended = true;
        }
        if (ended) break;
      }
      if (page.length > 0) yield page;
      if (ended) return;
      if (entries.length === 0) {
        // Nothing new: the terminal entry may have been trimmed away or the job deleted.
        if (state === null) throw new JobNotFoundError(jobId, seen);
        if (isTerminal(state as JobState)) {
          const more = (await redis
            .xread('COUNT', 1, 'STREAMS', stream, cursor)
            // Redis went away between the two reads: the next round reads again.
            .catch((err: unknown) => (isTransientRedisError(err) ? undefined : Promise.reject(err)))) as
            | typeof reply
            | undefined;
          if (more === undefined) continue;
          if (!more || more[0]?.[1].length === 0) {
            yield [{ type: 'state', cursor, from: null, to: state as JobState, terminal: true }];
            return;
          }
        }
      }
    }
  } finally {
    options.signal?.removeEventListener('abort', abort);
    reader.disconnect();
  }
}

function lastId(entries: [string, string[]][]): string {
  return entries[entries.length - 1]?.[0] as string;
}

/** Whether stream entry id `a` comes after `b`. */
function isAfter(a: string, b: string): boolean {
  const [ams, aseq] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bms, bseq] = b.split('-').map(BigInt) as [bigint, bigint];
  return ams > bms || (ams === bms && aseq > bseq);
}

/**
 * The id of the stream's last entry, for a follow that stops there; null: nothing to read (an
 * empty stream of a job that exists). A job that does not exist is JobNotFoundError.
 */
async function streamEnd(redis: RedisClient, keys: KeySpace, jobId: string): Promise<string | null> {
  const [last] = (await redis.xrevrange(keys.sandbox(jobId).events, '+', '-', 'COUNT', 1)) as [
    string,
    string[],
  ][];
  if (last) return last[0];
  if ((await redis.exists(keys.job(jobId))) === 0) throw new JobNotFoundError(jobId, false);
  return null;
}
