import type { KeySpace, RedisClient } from '@sandstream/bus';
import type { FastifyReply } from 'fastify';
import { lastLifecycleId } from './list-changes.js';
import type { Principal } from './principal.js';

/** The header naming where a list's changes start (GET /v1/events?kind=…&from=<it>). */
export const EVENTS_CURSOR_HEADER = 'x-events-cursor';

/**
 * Names, in EVENTS_CURSOR_HEADER, the newest lifecycle entry before the list is read: a client
 * that subscribes to the list's changes from it misses none made while it read the list (a
 * change it already saw comes again, as the whole item, which it applies as it is).
 */
export async function markEventsCursor(
  ctx: { redis: RedisClient; keys: KeySpace },
  reply: FastifyReply,
): Promise<void> {
  reply.header(EVENTS_CURSOR_HEADER, await lastLifecycleId(ctx.redis, ctx.keys));
}

/**
 * One page of a newest-first list: the SDK lists at most 1,000, so a page is cut from the first
 * `offset + limit`; `next` is the offset of the page after it, when there may be one.
 */
function page<T>(all: T[], offset: number, limit: number): { items: T[]; next: number | undefined } {
  const items = all.slice(offset, offset + limit);
  const next = offset + limit;
  return { items, next: items.length === limit && next < 1000 ? next : undefined };
}

/**
 * Whose records a list shows: `{ tenant }` (undefined: every tenant, for an admin who names
 * none), or null when a key asks for another tenant's, which is an empty list rather than a
 * 403, so that a list never tells whether another tenant exists.
 */
export function listScope(
  principal: Principal,
  asked: string | undefined,
): { tenant: string | undefined } | null {
  if (principal.admin) return { tenant: asked };
  if (asked !== undefined && asked !== principal.tenant) return null;
  return { tenant: principal.tenant };
}

/**
 * A list route's answer: reads as many records as the page needs (`read(count)`), cuts the page
 * and names the next one in `x-next-offset`.
 */
export async function sendPage<T>(
  reply: FastifyReply,
  query: { offset?: number | undefined; limit?: number | undefined },
  read: (count: number) => Promise<T[]>,
): Promise<T[]> {
  const { offset = 0, limit = 100 } = query;
  const { items, next } = page(await read(Math.min(1000, offset + limit)), offset, limit);
  if (next !== undefined) reply.header('x-next-offset', String(next));
  return items;
}
