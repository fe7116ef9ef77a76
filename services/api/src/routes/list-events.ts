import { sandboxRecordOf, TenantSchema, userJobId } from '@sandstream/bus';
import { strictObject } from '@sandstream/wire';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { principalOf } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { changesOf, compareIds, heldSince, type ListChange, ListChangeHub } from '../list-changes.js';
import { listScope } from '../list-page.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { ProblemSchema } from '../problem.js';
import { JobResponse, SandboxResponse } from '../schemas.js';
import { followerStream, sseEvent } from '../sse.js';
import { eventStreamResponse } from '../sse-schemas.js';
import { withUserId } from '../tenant-scope.js';

/**
 * Bytes a list subscriber may leave unread before it is dropped (told to reload): the tail
 * writes to every subscriber without waiting, so this is what a slow one holds at most, plus
 * one page of changes.
 */
export const MAX_UNREAD_BYTES = 256 * 1024;
/** Entries a resume (Last-Event-ID) reads back at most: past it, reading the list is cheaper. */
export const MAX_RESUME_ENTRIES = 10_000;
/** Live changes held for a subscriber while it reads back what it missed, at most. */
const MAX_HELD_CHANGES = 10_000;

const ENTRY_ID = /^\d+-\d+$/;

export const ListEventsQuery = strictObject({
  kind: z.enum(['jobs', 'sandboxes'], { error: 'kind must be jobs or sandboxes' }),
  /** An admin's: only this tenant's records (default: every tenant's). */
  tenant: TenantSchema.optional(),
  /** Resume after this entry id (the list's `x-events-cursor`, or the Last-Event-ID header). */
  from: z.string().regex(ENTRY_ID, 'from is an event id such as 1712345678901-0').optional(),
});
type ListEventsQuery = z.infer<typeof ListEventsQuery>;

const entryId = z
  .string()
  .describe('the lifecycle entry id: send it back as Last-Event-ID to resume after it');
const itemEvent = <Name extends string>(name: Name, item: z.ZodType) =>
  z.object({ event: z.literal(name), id: entryId, data: z.object({ item }) });

/** The events of a list stream, for the OpenAPI document (list-events.ts writes them by hand). */
export const ListEventSchema = z
  .discriminatedUnion('event', [
    itemEvent('created', z.union([JobResponse, SandboxResponse])).describe(
      'a new record, as the list shows it',
    ),
    itemEvent('changed', z.union([JobResponse, SandboxResponse])).describe(
      'a record whose state (or readiness, a pause, a close) changed: the whole item as the list shows it now',
    ),
    z
      .object({
        event: z.literal('removed'),
        id: entryId,
        data: z.object({ id: z.string(), tenant: z.string().optional() }),
      })
      .describe('a record gone (its retention ended)'),
    z
      .object({ event: z.literal('reload'), data: z.object({ reason: z.string() }) })
      .describe(
        'the last event: the stream could not keep the list whole (a slow reader, a resume past what the stream holds); read the list again and subscribe with its cursor',
      ),
    z.object({ event: z.literal('error'), data: ProblemSchema }),
  ])
  .meta({ id: 'ListEvent' });

/** The item a list of `kind` shows for a record, or null when that list does not show it. */
function itemOf(kind: ListEventsQuery['kind'], change: ListChange): unknown {
  if (!change.record) return null;
  if (kind === 'jobs') return JobResponse.parse(withUserId(change.record));
  const sandbox = sandboxRecordOf(change.record);
  return sandbox ? SandboxResponse.parse(withUserId(sandbox)) : null;
}

/** The SSE text of the changes a subscriber sees (each item made once per kind for all of them). */
class Rendered {
  private readonly made = new Map<string, string>();

  text(kind: ListEventsQuery['kind'], change: ListChange): string {
    const key = `${kind} ${change.id}`;
    let text = this.made.get(key);
    if (text === undefined) {
      if (change.type === 'removed') {
        const removed = { id: userJobId(change.jobId), ...(change.tenant ? { tenant: change.tenant } : {}) };
        text = sseEvent('removed', removed, change.id);
      } else {
        const item = itemOf(kind, change);
        text = item === null ? '' : sseEvent(change.type, { item }, change.id);
      }
      this.made.set(key, text);
    }
    return text;
  }
}

/** Renders once per page of changes, whatever the number of subscribers. */
const rendered = new WeakMap<readonly ListChange[], Rendered>();
function renderedOf(changes: readonly ListChange[]): Rendered {
  let r = rendered.get(changes);
  if (!r) {
    r = new Rendered();
    rendered.set(changes, r);
  }
  return r;
}

/**
 * One subscriber: the changes of its tenant (every tenant's for an admin who names none; none
 * for a key that names another tenant, as the list answers) and kind, written without waiting.
 */
async function streamListChanges(
  ctx: ApiContext,
  hub: ListChangeHub,
  query: ListEventsQuery,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const scope = listScope(principalOf(request), query.tenant);
  const header = request.headers['last-event-id'];
  const asked = Array.isArray(header) ? header[0] : header;
  const cursor = asked !== undefined && ENTRY_ID.test(asked) ? asked : query.from;
  const sse = followerStream(request, reply);
  const shows = (change: ListChange) =>
    scope !== null && (scope.tenant === undefined || change.tenant === scope.tenant);

  let held: (readonly ListChange[])[] | null = [];
  let heldCount = 0;
  let dropped = false;
  let unsubscribe = () => {};
  const reload = (reason: string) => {
    if (dropped) return;
    dropped = true;
    unsubscribe();
    sse.sendText(sseEvent('reload', { reason }));
    sse.end();
  };
  const deliver = (changes: readonly ListChange[]) => {
    if (dropped || sse.signal.aborted) return;
    const r = renderedOf(changes);
    let text = '';
    for (const change of changes) if (shows(change)) text += r.text(query.kind, change);
    if (text !== '') sse.sendText(text);
    // The tail does not wait for anyone: a reader this far behind is dropped, not buffered for.
    if (sse.unsentBytes() > MAX_UNREAD_BYTES) reload('the client read too slowly; read the list again');
  };
  try {
    const subscription = await hub.subscribe((changes) => {
      if (held === null) return deliver(changes);
      held.push(changes);
      heldCount += changes.length;
      if (heldCount > MAX_HELD_CHANGES) reload('too many changes while resuming; read the list again');
    });
    unsubscribe = subscription.unsubscribe;
    // A client gone while it subscribed fired its abort before this listener was there.
    if (sse.signal.aborted) {
      unsubscribe();
      return reply;
    }
    sse.signal.addEventListener('abort', () => unsubscribe(), { once: true });
    if (cursor !== undefined && compareIds(cursor, subscription.position) < 0) {
      await resume(ctx, cursor, subscription.position, deliver, reload);
    }
    const pending = held;
    held = null;
    for (const changes of pending) deliver(changes);
  } catch (err) {
    unsubscribe();
    if (sse.signal.aborted) sse.end();
    else await sse.fail(err);
  }
  return reply;
}

/** Reads back the entries after `cursor` up to `until` (what the subscriber missed). */
async function resume(
  ctx: ApiContext,
  cursor: string,
  until: string,
  deliver: (changes: readonly ListChange[]) => void,
  reload: (reason: string) => void,
): Promise<void> {
  if (!(await heldSince(ctx.redis, ctx.keys, cursor)))
    return reload('the stream no longer holds the changes since that cursor; read the list again');
  let after = cursor;
  let read = 0;
  for (;;) {
    const entries = (await ctx.redis.xrange(ctx.keys.lifecycleStream, `(${after}`, until, 'COUNT', 200)) as [
      string,
      string[],
    ][];
    if (entries.length === 0) return;
    read += entries.length;
    if (read > MAX_RESUME_ENTRIES)
      return reload(`more than ${MAX_RESUME_ENTRIES} changes since that cursor; read the list again`);
    deliver(await changesOf(ctx.client, entries));
    after = entries[entries.length - 1]?.[0] ?? until;
    if (compareIds(after, until) >= 0) return;
  }
}

/** GET /v1/events?kind=jobs|sandboxes: the changes of a list, live (issue 37). */
export function listEventRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    const hub = new ListChangeHub({
      client: ctx.client,
      redis: ctx.redis,
      keys: ctx.keys,
      onError: (err) => app.log.warn({ err }, 'list change tail: read failed, retrying'),
    });
    app.addHook('onClose', async () => hub.close());
    app.get(
      '/events',
      {
        schema: {
          tags: ['jobs', 'sandboxes'],
          summary:
            "SSE of a list's changes (created, changed, removed items, as GET /v1/jobs or /v1/sandboxes shows them), resumable with Last-Event-ID from the list's x-events-cursor",
          querystring: ListEventsQuery,
          response: {
            200: eventStreamResponse("the list's changes as server-sent events", ListEventSchema),
            ...problemResponses(403),
          },
        },
      },
      async (request, reply) => streamListChanges(ctx, hub, request.query, request, reply),
    );
  };
}
