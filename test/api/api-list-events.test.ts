import { connect } from 'node:net';
import { createKeySpace, scopedJobId } from '@sandstream/bus';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { type apiClient, servedApiClient, sseEvents } from './api-client.js';

// Live lists (issue 37): GET /v1/events?kind=… streams a list's changes from the services' own
// lifecycle stream, through the real API and services: a tenant sees its own sandbox created,
// ready and closed, another tenant sees none of it, an admin sees both, a reconnect with
// Last-Event-ID resumes after the last event it saw, and one jobs request carries several states.

let s: ApiStack;
let call: ReturnType<typeof apiClient>;
const keys = { acme: '', globex: '', admin: '' };

interface ListEvent {
  id: string | undefined;
  event: string;
  data: { item?: { id: string; tenant: string; state: string; kind?: string }; id?: string; reason?: string };
}

beforeAll(async () => {
  s = await startApiStack({ label: 'api-list-events' });
  call = await servedApiClient(s);
  keys.acme = (await s.key('acme')).key;
  keys.globex = (await s.key('globex')).key;
  keys.admin = (await s.key('ops', true)).key;
}, 120_000);

afterAll(async () => {
  await s?.stop();
}, 60_000);

/** A list stream, read in the background into `events`; `until` waits for one that matches. */
async function subscribe(key: string, query: string, headers: Record<string, string> = {}) {
  const controller = new AbortController();
  const res = await s.request(`/v1/events?${query}`, { key, signal: controller.signal, headers });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const events: ListEvent[] = [];
  const waiters = new Set<() => void>();
  const reading = (async () => {
    try {
      for await (const e of sseEvents(res)) {
        events.push(e as ListEvent);
        for (const wake of waiters) wake();
      }
    } catch {
      // aborted
    }
  })();
  return {
    events,
    async until(what: string, match: (e: ListEvent) => boolean, timeoutMs = 30_000): Promise<ListEvent> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = events.find(match);
        if (found) return found;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no ${what} in ${JSON.stringify(events.map((e) => e.event))}`);
        await new Promise<void>((resolve) => {
          const wake = () => {
            waiters.delete(wake);
            resolve();
          };
          waiters.add(wake);
          setTimeout(wake, Math.min(left, 500));
        });
      }
    },
    async close() {
      controller.abort();
      await reading;
    },
  };
}

const about = (id: string) => (e: ListEvent) => e.data.item?.id === id || e.data.id === id;

describe('list events', () => {
  it('a tenant sees its sandbox created, ready and closed; another sees none of it; resumes after the last event', async () => {
    // The list first: its cursor names where its changes start.
    const listed = await s.request('/v1/sandboxes', { key: keys.acme });
    expect(listed.status).toBe(200);
    const cursor = listed.headers.get('x-events-cursor');
    expect(cursor).toMatch(/^\d+-\d+$/);
    const acme = await subscribe(keys.acme, `kind=sandboxes&from=${cursor}`);
    const globex = await subscribe(keys.globex, 'kind=sandboxes');
    const admin = await subscribe(keys.admin, 'kind=jobs');

    const id = await s.createSandbox(keys.acme);
    const created = await acme.until('created', (e) => e.event === 'created' && e.data.item?.id === id);
    expect(created.data.item).toMatchObject({ id, tenant: 'acme' });
    expect(created.id).toMatch(/^\d+-\d+$/);
    // Ready is not a transition (running before and after): the dispatcher's change says it.
    await acme.until(
      'ready',
      (e) => e.event === 'changed' && e.data.item?.id === id && e.data.item.state === 'ready',
    );
    const closed = await call('DELETE', `/v1/sandboxes/${id}`, { key: keys.acme });
    expect(closed.status).toBe(200);
    const last = await acme.until(
      'closed',
      (e) => e.event === 'changed' && e.data.item?.id === id && e.data.item.state === 'closed',
    );
    // The admin's jobs list shows every tenant's records (a sandbox is one, kind sandbox).
    await admin.until(
      'acme in the admin list',
      (e) => e.data.item?.id === id && e.data.item.tenant === 'acme',
    );

    // Another tenant's stream carries nothing of acme's: its own sandbox's events come (after
    // acme's, on the same tail), and nothing before them.
    const mine = await s.createSandbox(keys.globex);
    await globex.until('its own', (e) => e.event === 'created' && e.data.item?.id === mine);
    expect(globex.events.filter((e) => e.data.item?.tenant !== 'globex' && e.event !== 'removed')).toEqual(
      [],
    );
    expect(globex.events.some((e) => e.data.item?.tenant === 'acme')).toBe(false);
    expect(acme.events.some(about(mine))).toBe(false);

    // A reconnect from the created event's id gets what followed it, not the created one again.
    const resumed = await subscribe(keys.acme, 'kind=sandboxes', { 'last-event-id': created.id ?? '' });
    const again = await resumed.until('closed again', (e) => e.id === last.id);
    expect(resumed.events.some((e) => e.id === created.id)).toBe(false);
    expect(again.data.item?.state).toBe('closed');
    // A key asking for another tenant's list gets a stream with nothing in it.
    const nosy = await subscribe(keys.acme, `kind=sandboxes&tenant=globex&from=${cursor}`);
    await call('DELETE', `/v1/sandboxes/${mine}`, { key: keys.globex });
    await globex.until('closed', (e) => e.data.item?.id === mine && e.data.item.state === 'closed');
    expect(nosy.events).toEqual([]);
    await Promise.all([acme.close(), globex.close(), admin.close(), resumed.close(), nosy.close()]);
  }, 120_000);

  it('a cursor past what the stream still holds is told to reload, and the stream ends', async () => {
    const held = await s.request('/v1/jobs', { key: keys.acme });
    const cursor = held.headers.get('x-events-cursor') ?? '';
    // Nothing trimmed since that cursor: it resumes (no reload).
    const fine = await subscribe(keys.acme, `kind=jobs&from=${cursor}`);
    // A change after the cursor, then trimmed away (as MAXLEN does on a busy installation).
    const id = await s.createSandbox(keys.acme);
    await fine.until('created', (e) => e.event === 'created' && e.data.item?.id === id);
    expect(fine.events.some((e) => e.event === 'reload')).toBe(false);
    const stream = createKeySpace(s.stack.namespace).lifecycleStream;
    const newest = (await s.stack.redis.xrevrange(stream, '+', '-', 'COUNT', 1))[0]?.[0] ?? '';
    await s.stack.redis.xtrim(stream, 'MINID', newest);
    // Its stream is one event, and ends (text() returns only once the server ended it).
    const late = await s.request(`/v1/events?kind=jobs&from=${cursor}`, { key: keys.acme });
    expect(late.status).toBe(200);
    const text = await late.text();
    expect(text).toMatch(/^event: reload\ndata: \{"reason":"[^"]*read the list again"\}\n\n$/);
    await fine.close();
    await call('DELETE', `/v1/sandboxes/${id}`, { key: keys.acme });
  }, 60_000);

  it('a reader that does not keep up is dropped with a reload event, not buffered for', async () => {
    const id = await s.createSandbox(keys.acme);
    const url = new URL(`${s.url}/v1/events?kind=sandboxes`);
    // A client that reads nothing: the socket's buffers fill, then the API's own bound.
    const socket = connect(Number(url.port), url.hostname);
    socket.pause();
    socket.write(
      `GET ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${keys.acme}\r\naccept: text/event-stream\r\n\r\n`,
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    // Many changes of one record (each a whole item on the stream), written as the services would.
    const stream = createKeySpace(s.stack.namespace).lifecycleStream;
    const entry = JSON.stringify({
      jobId: scopedJobId('acme', id),
      tenant: 'acme',
      what: 'ready',
      at: Date.now(),
    });
    // ~0.7 kB each: 55 MB, past what the loopback's socket buffers take (up to 36 MB here).
    for (let round = 0; round < 40; round++) {
      const pipeline = s.stack.redis.pipeline();
      for (let i = 0; i < 2000; i++) pipeline.xadd(stream, '*', 'changed', entry);
      await pipeline.exec();
    }
    // Then it reads: what it gets ends with a reload event and the end of the response.
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      text += chunk;
    });
    socket.resume();
    await vi.waitFor(
      () =>
        expect(text).toMatch(/event: reload\ndata: \{"reason":"[^"]*too slowly[^"]*"\}\n\n(\r\n)?0\r\n\r\n$/),
      {
        timeout: 30_000,
        interval: 200,
      },
    );
    const delivered = text.split('event: changed').length - 1;
    expect(delivered).toBeGreaterThan(0);
    expect(delivered).toBeLessThan(80_000);
    socket.destroy();
    await call('DELETE', `/v1/sandboxes/${id}`, { key: keys.acme });
  }, 90_000);

  it('one jobs request carries several states; a bad one is refused naming the field', async () => {
    const both = await call<{ state: string; id: string }[]>(
      'GET',
      '/v1/jobs?state=running,succeeded,cancelled&limit=1000',
      { key: keys.admin },
    );
    expect(both.status).toBe(200);
    const states = new Set(both.body.map((j) => j.state));
    expect(states.has('cancelled')).toBe(true);
    for (const state of states) expect(['running', 'succeeded', 'cancelled']).toContain(state);
    const bad = await call<{ detail: string }>('GET', '/v1/jobs?state=running,nope', { key: keys.admin });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('state');
  }, 30_000);
});
