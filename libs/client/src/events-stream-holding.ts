import type { RedisClient } from '@sandstream/bus';
import { decodeFollowEntry } from './follow-entry.js';

/**
 * How much of a job's log its Redis events stream still holds: `whole` (from the job's first
 * entry), `trimmed` (the cap, or the archiver after archiving, took entries from its start), or
 * `gone` (the job's keys were deleted after retention).
 */
export type EventsStreamHolding = 'whole' | 'trimmed' | 'gone';

export async function eventsStreamHolding(redis: RedisClient, key: string): Promise<EventsStreamHolding> {
  let reply: unknown;
  try {
    reply = await redis.call('XINFO', 'STREAM', key);
  } catch (err) {
    if (/no such key/i.test((err as Error).message)) return 'gone';
    throw err;
  }
  const info = new Map<string, unknown>();
  if (Array.isArray(reply))
    for (let i = 0; i + 1 < reply.length; i += 2) info.set(String(reply[i]), reply[i + 1]);
  // Redis 7 counts every entry ever added: more than it holds means some were trimmed (or
  // deleted). Its max-deleted-entry-id would not do: XTRIM leaves it at 0-0.
  const added = info.get('entries-added');
  const length = info.get('length');
  if (typeof added === 'number' && typeof length === 'number') return added > length ? 'trimmed' : 'whole';
  // Before Redis 7: a job's stream starts with its record's creation (a state change from
  // nothing); any other first entry means the start was trimmed.
  const first = info.get('first-entry');
  if (!Array.isArray(first)) return 'whole';
  const [id, fields] = first as [unknown, unknown];
  const item =
    typeof id === 'string' && Array.isArray(fields) ? decodeFollowEntry(id, fields.map(String)) : null;
  return item?.type === 'state' && item.from === null ? 'whole' : 'trimmed';
}
