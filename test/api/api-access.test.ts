import { readFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { freePort, type RunningService, startService } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { type apiClient, servedApiClient, sseEvents } from './api-client.js';

// Who may do what (tenants, admin, anonymous, revoked keys, rate limits shared by replicas),
// resumable SSE, the WebSocket shell, and hostile input, against the real services.

let s: ApiStack;
let call: ReturnType<typeof apiClient>;
/** Two more replicas on the same Redis: no anonymous access, 20 requests a minute per key. */
const strict: { service: RunningService; url: string }[] = [];
const keys: Record<'acme' | 'globex' | 'admin', string> = { acme: '', globex: '', admin: '' };

beforeAll(async () => {
  s = await startApiStack({ label: 'api-access' });
  call = await servedApiClient(s);
  keys.acme = (await s.key('acme')).key;
  keys.globex = (await s.key('globex')).key;
  keys.admin = (await s.key('ops', true)).key;
  for (let i = 0; i < 2; i++) {
    const port = await freePort();
    const service = await startService('api', {
      ...s.stack.env,
      REDIS_URL: s.redisUrl,
      API_PORT: String(port),
      API_ANONYMOUS: 'off',
      API_RATE_LIMIT_PER_MINUTE: '20',
    });
    strict.push({ service, url: `http://127.0.0.1:${port}` });
  }
}, 120_000);

afterAll(async () => {
  await Promise.all(strict.map((r) => r.service.stop(10_000)));
  await s?.stop();
}, 60_000);

describe('tenants', () => {
  it("another tenant's sandbox or job is a 404; an admin key sees every tenant; anonymous loopback is tenant default", async () => {
    const { body: sandbox } = await call<{ id: string }>('POST', '/v1/sandboxes', {
      key: keys.acme,
      json: {},
    });
    const { body: job } = await call<{ jobId: string }>('POST', '/v1/jobs', {
      key: keys.acme,
      json: { steps: [{ command: 'true' }] },
    });
    const sid = sandbox.id;
    const requests: [string, string, unknown?][] = [
      ['GET', `/v1/sandboxes/${sid}`],
      ['POST', `/v1/sandboxes/${sid}/exec`, { command: 'true' }],
      ['GET', `/v1/sandboxes/${sid}/fs?path=x`],
      ['GET', `/v1/sandboxes/${sid}/history`],
      ['GET', `/v1/sandboxes/${sid}/events`],
      ['POST', `/v1/sandboxes/${sid}/keepalive`],
      ['POST', `/v1/sandboxes/${sid}/timeout`, { timeoutSeconds: 60 }],
      ['DELETE', `/v1/sandboxes/${sid}`],
      ['GET', `/v1/jobs/${job.jobId}`],
      ['GET', `/v1/jobs/${job.jobId}/events`],
      ['DELETE', `/v1/jobs/${job.jobId}`],
    ];
    for (const key of [keys.globex, undefined]) {
      for (const [method, path, json] of requests) {
        const answer = await call<{ detail: string }>(method, path, {
          ...(key ? { key } : {}),
          ...(json ? { json } : {}),
        });
        expect(answer.status, `${method} ${path}`).toBe(404);
        // The same answer as for an id that does not exist: nothing says it does.
        expect(answer.body.detail).toMatch(/^(sandbox|job) \S+ not found$/);
      }
    }
    // As an event stream too: refused before any stream starts.
    const streamed = await call('POST', `/v1/sandboxes/${sid}/exec`, {
      key: keys.globex,
      json: { command: 'true' },
      headers: { accept: 'text/event-stream' },
    });
    expect(streamed.status).toBe(404);
    const others = await call<{ id: string }[]>('GET', '/v1/sandboxes', { key: keys.globex });
    expect(others.body.map((b) => b.id)).not.toContain(sid);
    const asked = await call<{ id: string }[]>('GET', '/v1/sandboxes?tenant=acme', { key: keys.globex });
    expect(asked.body).toEqual([]);
    // A key cannot create for another tenant; an admin can look at any (ids are per tenant: it
    // names the tenant whose ids it means).
    const forged = await call<{ errors: { field: string }[] }>('POST', '/v1/sandboxes', {
      key: keys.globex,
      json: { tenant: 'acme' },
    });
    expect(forged.status).toBe(403);
    expect(forged.body.errors[0]?.field).toBe('tenant');
    expect(
      (
        await call<{ tenant: string }>('GET', `/v1/sandboxes/${sid}`, {
          key: keys.admin,
          headers: { 'x-sandstream-tenant': 'acme' },
        })
      ).body.tenant,
    ).toBe('acme');
    expect(
      (await call<{ id: string }[]>('GET', '/v1/sandboxes?tenant=acme', { key: keys.admin })).body.map(
        (b) => b.id,
      ),
    ).toContain(sid);
    expect(
      (
        await call('GET', `/v1/jobs/${job.jobId}`, {
          key: keys.admin,
          headers: { 'x-sandstream-tenant': 'acme' },
        })
      ).status,
    ).toBe(200);
    // Anonymous from loopback acts as `default`.
    const mine = await call<{ tenant: string; id: string }>('POST', '/v1/sandboxes?wait=false', { json: {} });
    expect(mine.body.tenant).toBe('default');
    expect((await call('DELETE', `/v1/sandboxes/${mine.body.id}`, { key: keys.acme })).status).toBe(404);
    await call('DELETE', `/v1/sandboxes/${mine.body.id}`);
    await call('DELETE', `/v1/sandboxes/${sid}`, { key: keys.acme });
  }, 120_000);

  it('no key is a 401 where anonymous access is off; a bad or revoked key is a 401 everywhere', async () => {
    const [replica] = strict;
    const none = await fetch(`${replica?.url}/v1/sandboxes`);
    expect(none.status).toBe(401);
    expect(none.headers.get('content-type')).toContain('application/problem+json');
    expect(((await none.json()) as { detail: string }).detail).toMatch(/API key is needed/);
    const bad = await call('GET', '/v1/sandboxes', { key: 'sk_0123456789abcdef_nope' });
    expect(bad.status).toBe(401);
    const fresh = await s.key('acme');
    const cli = await import('@sandstream/bus');
    const store = new cli.ApiKeyStore({ redis: s.stack.redis, keys: cli.createKeySpace(s.stack.namespace) });
    expect(await store.revoke(fresh.id)).toBe(true);
    expect((await call('GET', '/v1/sandboxes', { key: fresh.key })).status).toBe(401);
    expect((await store.list()).map((k) => k.id)).not.toContain(fresh.id);
  });

  it('rate limits per key are shared by the replicas (through Redis)', async () => {
    const { key } = await s.key('limited');
    const statuses: number[] = [];
    for (let i = 0; i < 24; i++) {
      const replica = strict[i % 2];
      const res = await fetch(`${replica?.url}/v1/pools`, { headers: { authorization: `Bearer ${key}` } });
      statuses.push(res.status);
      if (res.status === 429) expect(res.headers.get('content-type')).toContain('application/problem+json');
    }
    expect(statuses.slice(0, 20).every((c) => c === 200)).toBe(true);
    // Below 80 % of the limit a replica does not wait for Redis' count (rate-limiter.ts), so
    // while Redis is slow to answer (another suite loading it) a few past the limit may pass;
    // once the counts are in, every replica refuses: 28 requests, 14 on each, against 20 a minute
    // (counted per replica, each would still admit these).
    const after: number[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await fetch(`${strict[i % 2]?.url}/v1/pools`, {
        headers: { authorization: `Bearer ${key}` },
      });
      after.push(res.status);
    }
    expect(after).toEqual([429, 429, 429, 429]);
  });

  it('a browser session: the key exchanged for an HttpOnly, SameSite=Strict cookie that acts as the key, until it is ended', async () => {
    const opened = await s.request('/v1/auth/session', { method: 'POST', key: keys.admin });
    expect(opened.status).toBe(204);
    const cookie = opened.headers.get('set-cookie') ?? '';
    expect(cookie).toMatch(
      /^sandstream_session=[A-Za-z0-9_-]+; Path=\/; HttpOnly; SameSite=Strict; Max-Age=3600$/,
    );
    const session = cookie.split(';')[0] as string;
    const board = await s.request('/admin/queues', { headers: { cookie: session } });
    expect(board.status).toBe(200);
    // Anonymous access cannot open one.
    expect((await s.request('/v1/auth/session', { method: 'POST' })).status).toBe(401);
    expect(
      (await s.request('/v1/auth/session', { method: 'DELETE', headers: { cookie: session } })).status,
    ).toBe(204);
    const after = await s.request('/v1/pools', { headers: { cookie: session } });
    expect(after.status).toBe(401);
  });

  it('the queue dashboard is for admin keys only', async () => {
    expect((await s.request('/admin/queues', { key: keys.acme })).status).toBe(403);
    const board = await s.request('/admin/queues', { key: keys.admin });
    expect(board.status).toBe(200);
    expect(await board.text()).toContain('<html');
  });
});

describe('live output', () => {
  it('SSE: a client that disconnects mid-job and reconnects with Last-Event-ID misses no line and sees none twice', async () => {
    const lines = 3000;
    const script = `i=0; while [ $i -lt ${lines} ]; do i=$((i+1)); echo line-$i; if [ $((i % 250)) = 0 ]; then sleep 0.2; fi; done`;
    const { body } = await call<{ jobId: string }>('POST', '/v1/jobs', {
      key: keys.acme,
      json: { steps: [{ command: 'sh', args: ['-c', script] }] },
    });
    const seen: string[] = [];
    let lastId: string | undefined;
    let connections = 0;
    let ended = false;
    while (!ended) {
      connections++;
      const controller = new AbortController();
      const res = await s.request(`/v1/jobs/${body.jobId}/events`, {
        key: keys.acme,
        signal: controller.signal,
        headers: lastId ? { 'last-event-id': lastId } : {},
      });
      let taken = 0;
      try {
        for await (const e of sseEvents(res)) {
          lastId = e.id;
          if (e.event === 'output') {
            seen.push((e.data as { line: string }).line);
            // Hang up after a few hundred lines, four times, wherever that falls.
            if (++taken === 400 && connections <= 4) break;
          }
          if (e.event === 'state' && (e.data as { terminal: boolean }).terminal) ended = true;
        }
      } finally {
        controller.abort();
      }
    }
    expect(connections).toBeGreaterThanOrEqual(5);
    expect(seen).toEqual(Array.from({ length: lines }, (_, i) => `line-${i + 1}`));
  }, 120_000);

  it('WebSocket shell with a one-use ticket: cd /tmp, then pwd shows /tmp; resize; a used ticket is refused', async () => {
    const { body: sandbox } = await call<{ id: string }>('POST', '/v1/sandboxes', {
      key: keys.acme,
      json: {},
    });
    const { body: ticket } = await call<{ ticket: string }>('POST', '/v1/auth/ws-ticket', { key: keys.acme });
    const wsUrl = `${s.url.replace('http', 'ws')}/v1/sandboxes/${sandbox.id}/shell?ticket=${ticket.ticket}`;
    const socket = new WebSocket(wsUrl);
    let output = '';
    const messages: { type: string; exitCode?: number }[] = [];
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) output += data.toString('utf8');
      else messages.push(JSON.parse(data.toString('utf8')) as { type: string });
    });
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    const waitFor = (what: string, check: () => boolean) =>
      vi.waitUntil(check, { timeout: 20_000, interval: 50 }).catch(() => {
        throw new Error(`timed out waiting for ${what}; output: ${JSON.stringify(output)}`);
      });
    await waitFor('started', () => messages.some((m) => m.type === 'started'));
    socket.send(JSON.stringify({ type: 'resize', cols: 120, rows: 40 }));
    socket.send(Buffer.from('cd /tmp\n'), { binary: true });
    socket.send(JSON.stringify({ type: 'input', data: 'pwd; stty size\n' }));
    await waitFor('pwd', () => /[\r\n]\/tmp\r\n/.test(output) && /40 120/.test(output));
    socket.send(JSON.stringify({ type: 'input', data: 'exit 7\n' }));
    await waitFor('exit', () => messages.some((m) => m.type === 'exit'));
    expect(messages.find((m) => m.type === 'exit')?.exitCode).toBe(7);
    // The sandbox's own Redis user may send its terminal output as MULTI/EXEC (sandbox-acl.ts).
    expect(output).not.toContain('bytes of output dropped');

    // The ticket was good once.
    const again = new WebSocket(wsUrl);
    const status = await new Promise<number>((resolve) => {
      again.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      again.once('open', () => resolve(101));
    });
    expect(status).toBe(401);
    await call('DELETE', `/v1/sandboxes/${sandbox.id}`, { key: keys.acme });
  }, 60_000);
});

interface Answer {
  status: number;
  type: string;
  text: string;
}

/**
 * One request over node:http: unlike fetch it still reports the answer when the server refuses
 * a body before it was all sent (413 on Content-Length) and closes the connection.
 */
function raw(
  path: string,
  init: { method?: string; headers?: Record<string, string>; body?: string; announce?: number } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = httpRequest(
      `${s.url}${path}`,
      {
        method: init.method ?? 'GET',
        headers: init.headers ?? {},
        agent: false,
      },
      (res) => {
        answered = true;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), text });
        });
        res.on('error', reject);
      },
    );
    req.on('error', (err) => {
      // The server may refuse a large body as soon as it sees its length and close the
      // connection while this side still writes: the answer, read meanwhile, is what counts.
      if (!answered) setTimeout(() => (answered ? undefined : reject(err)), 500);
    });
    if (init.announce === undefined) req.end(init.body);
    else {
      // Only the headers, announcing a body of this size: the server must refuse it from its
      // length alone (sending it all would race the refusal, which closes the connection).
      req.setHeader('content-length', String(init.announce));
      req.flushHeaders();
    }
  });
}

describe('hostile input', () => {
  it('1,000 malformed or hostile requests get 4xx problem details, never a 5xx; the service stays up with bounded memory', async () => {
    const rss = () =>
      Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${s.api.child.pid}/status`, 'utf8'))?.[1]) * 1024;
    const before = rss();
    const kinds: (() => Promise<Answer>)[] = [
      () =>
        raw('/v1/jobs', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"steps": [',
        }),
      () =>
        raw('/v1/jobs', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          announce: 17 * 1024 * 1024,
        }),
      // A large body that is sent: 1 MiB of JSON nested too deep and too wide for a job spec.
      () =>
        raw('/v1/jobs', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: `{"steps": [${'{"command": "x"},'.repeat(65_000)}{"command": "y"}]}`,
        }),
      () =>
        raw('/v1/jobs', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"steps": "no"}',
        }),
      () =>
        raw('/v1/jobs', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"__proto__": {"admin": true}, "steps": []}',
        }),
      () =>
        raw('/v1/jobs', {
          method: 'POST',
          headers: { 'content-type': 'application/yaml' },
          body: 'a: &a ["x","x"]\nb: &b [*a,*a]\nc: &c [*b,*b]\nd: [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n',
        }),
      () =>
        raw('/v1/jobs', { method: 'POST', headers: { 'content-type': 'application/xml' }, body: '<job/>' }),
      () =>
        raw('/v1/sandboxes', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"idleTimeoutSeconds": -1, "env": {"A": 5}}',
        }),
      () => raw('/v1/sandboxes/..%2F..%2Fetc%2Fpasswd', {}),
      () => raw(`/v1/sandboxes/${'a'.repeat(300)}`, {}),
      () =>
        raw('/v1/sandboxes/x/exec', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"command": ["sh"], "timeoutSeconds": 1e309}',
        }),
      () => raw('/v1/sandboxes/x/fs?path=', {}),
      () => raw('/v1/sandboxes?limit=-5&state=nope', {}),
      () => raw('/v1/jobs/x/events?from=abc', {}),
      () => raw('/v1/sandboxes', { headers: { authorization: 'Bearer' } }),
      () => raw('/v1/sandboxes', { headers: { authorization: `Bearer ${'k'.repeat(5000)}` } }),
      () =>
        raw('/v1/sandboxes', {
          headers: Object.fromEntries(
            Array.from({ length: 300 }, (_, i) => [`x-flood-${i}`, 'y'.repeat(200)]),
          ),
        }),
      () => raw('/v1/nothing/here', { method: 'PATCH' }),
      () => raw('/v1/sandboxes/x/shell', {}),
      () =>
        raw('/api/sandbox/x/fs', {
          method: 'PUT',
          headers: { 'content-type': 'application/json' },
          body: '{"path": 1}',
        }),
      () => raw('/v1/auth/ws-ticket', { method: 'POST', headers: { authorization: 'Basic dXNlcjpwYXNz' } }),
    ];
    const statuses = new Map<number, number>();
    for (let i = 0; i < 1000; i++) {
      const kind = i % kinds.length;
      const res = await (kinds[kind] as () => Promise<Answer>)().catch((err: Error) => {
        throw new Error(`request kind ${kind}: ${err.message}`);
      });
      const text = res.text;
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      expect(res.status, `request kind ${kind}: ${text.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
      expect(res.status, `request kind ${kind}: ${text.slice(0, 300)}`).toBeLessThan(500);
      // Node answers an over-large header block itself (431, no body); everything else is ours.
      if (res.status !== 431) expect(res.type, `request kind ${kind}`).toContain('application/problem+json');
    }
    expect(statuses.get(413)).toBeGreaterThan(0);
    expect(statuses.get(400)).toBeGreaterThan(0);
    const ready = await fetch(`http://127.0.0.1:${s.api.port}/readyz`);
    expect(ready.status).toBe(200);
    expect((await call('GET', '/v1/pools')).status).toBe(200);
    // 1,000 requests, 45 of them 1 MiB bodies: the process has not kept them.
    expect(rss() - before).toBeLessThan(150 * 1024 * 1024);
  }, 300_000);
});
