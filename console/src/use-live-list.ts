import { useCallback, useEffect, useState } from 'preact/hooks';
import { ApiError, request } from './api';
import { parseStream } from './sse';

/** What a list page shows: its items, newest first; the error that stopped it; a way to read it again. */
export interface LiveList<T> {
  data: T[] | undefined;
  error: string | undefined;
  reload: () => void;
}

export interface LiveListOptions<T> {
  /** Which list's changes (GET /v1/events?kind=…). */
  kind: 'jobs' | 'sandboxes';
  /** The list's GET path (with its filters); its answer names where its changes start (x-events-cursor). */
  path: string;
  /** An admin's tenant filter, passed to the change stream too. */
  tenant?: string;
  /** Whether an item belongs in the list as filtered (a change may take one in or out of it). */
  keep: (item: T) => boolean;
  /** At most this many, newest first (as the list's `limit`). */
  limit: number;
}

interface Item {
  id: string;
  tenant: string;
  createdAt: number;
}

/** How often a list is drawn again for its ages (nothing is read). */
const AGE_RENDER_MS = 5_000;

const identity = (item: { id: string; tenant: string }) => `${item.tenant}/${item.id}`;

/**
 * A list read once by GET, then kept current by the API's stream of its changes (created,
 * changed, removed), from the cursor the list's answer named, so no change made while it was read
 * is missed. When the stream asks for it (`reload`: the client read too slowly, or resumed past
 * what the server still holds) or drops, the list is read again and the stream opened again:
 * nothing is applied to a list that may have missed a change. No timer: nothing is read while
 * nothing changes.
 */
export function useLiveList<T extends Item>(options: LiveListOptions<T>, deps: unknown[]): LiveList<T> {
  const [data, setData] = useState<T[] | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [tick, setTick] = useState(0);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  // Ages and durations on the page count on while nothing changes: a render now and then, no read.
  const [, setClock] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setClock((c) => c + 1), AGE_RENDER_MS);
    return () => clearInterval(timer);
  }, []);
  // The caller names what the options depend on (deps); a new object each render is not a change.
  useEffect(() => {
    const controller = new AbortController();
    const { signal } = controller;
    let delayMs = 500;
    const run = async () => {
      while (!signal.aborted) {
        try {
          const listed = await request(options.path, { accept: 'application/json', signal });
          const cursor = listed.headers.get('x-events-cursor');
          const items = new Map<string, T>();
          for (const item of (await listed.json()) as T[]) items.set(identity(item), item);
          const show = () =>
            setData([...items.values()].sort((a, b) => b.createdAt - a.createdAt).slice(0, options.limit));
          show();
          setError(undefined);
          const query = new URLSearchParams({ kind: options.kind });
          if (options.tenant) query.set('tenant', options.tenant);
          if (cursor) query.set('from', cursor);
          const stream = await request(`/v1/events?${query}`, { accept: 'text/event-stream', signal });
          delayMs = 500;
          for await (const event of parseStream(stream)) {
            if (event.event === 'reload') break;
            if (event.event === 'created' || event.event === 'changed') {
              const { item } = JSON.parse(event.data) as { item: T };
              if (options.keep(item)) items.set(identity(item), item);
              else items.delete(identity(item));
            } else if (event.event === 'removed') {
              const gone = JSON.parse(event.data) as { id: string; tenant?: string };
              for (const [key, item] of items)
                if (item.id === gone.id && (gone.tenant === undefined || item.tenant === gone.tenant))
                  items.delete(key);
            } else continue;
            show();
          }
          // Told to reload, or the stream ended (a replica stopping): read the list again.
          if (signal.aborted) return;
        } catch (err) {
          if (signal.aborted) return;
          setError(err instanceof Error ? err.message : String(err));
          // Gone or not this key's to see: asking again will not change that.
          if (err instanceof ApiError && (err.status === 404 || err.status === 403)) return;
          await new Promise((resolve) => setTimeout(resolve, delayMs));
          delayMs = Math.min(delayMs * 2, 10_000);
        }
      }
    };
    void run();
    return () => controller.abort();
  }, [...deps, tick]);
  return { data, error, reload };
}
