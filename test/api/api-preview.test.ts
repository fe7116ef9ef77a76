import { scopedJobId } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import { findCarrierImage } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import type { ApiStack } from '../helpers/api-stack.js';
import { runCli } from '../helpers/cli-run.js';
import { cookieOf, countBytes, loopbackLookup, rawRequest, textOf } from '../helpers/preview-fetch.js';
import { type PreviewStack, startPreviewStack } from '../helpers/preview-stack.js';

// Preview URLs (issue 31 §1) on a real API and real Docker sandboxes on a bridge network: the
// proxy reaches the container's own address there, with no published port.
const carrier = findCarrierImage();
const MB = 1024 * 1024;

let stack: PreviewStack;
let s: ApiStack;
let keyA = '';
let keyB = '';
let id = '';

const urlOf = async (sandbox: string, port: number, query = '', key = keyA) => {
  const answer = await s.request(`/v1/sandboxes/${sandbox}/ports/${port}/url${query}`, { key });
  const body = (await answer.json()) as { url: string };
  if (answer.status !== 200) throw new Error(`url: ${answer.status} ${JSON.stringify(body)}`);
  return body.url;
};

const serve = (sandbox: string, port: number) => stack.serve(sandbox, port);

const createSandbox = async (wait = true) => {
  const created = await s.request(`/v1/sandboxes${wait ? '' : '?wait=false'}`, {
    method: 'POST',
    key: keyA,
    headers: { 'content-type': 'application/json' },
    body: '{}',
  });
  const record = (await created.json()) as { id: string };
  expect(created.status, JSON.stringify(record)).toBe(wait ? 201 : 202);
  return record.id;
};

describe.skipIf(!carrier && process.env.CI !== 'true')('preview URLs on Docker (issue 31 §1)', () => {
  beforeAll(async () => {
    stack = await startPreviewStack('preview');
    s = stack.s;
    keyA = stack.key;
    keyB = (await s.key('tenant-b')).key;
    id = await createSandbox();
    await serve(id, 8000);
  }, 240_000);

  afterAll(async () => {
    if (id) await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE', key: keyA }).catch(() => {});
    await stack?.stop();
  }, 120_000);

  it('path form: the printed URL opens as it is, then its cookie carries the page on', async () => {
    const url = await urlOf(id, 8000);
    expect(url).toMatch(new RegExp(`^${s.url}/v1/sandboxes/${id}/proxy/8000/\\?token=`));
    const page = await rawRequest(url);
    expect(page.statusCode).toBe(200);
    expect(await textOf(page)).toContain('preview ok');
    const cookie = cookieOf(page);
    expect(cookie).toMatch(/^sandstream_preview=/);
    expect(page.headers['set-cookie']?.[0]).toContain(`Path=/v1/sandboxes/${id}/proxy/8000/`);
    // The app never sees the key, the token or our cookie.
    const ping = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/8000/ping?x=1`, {
      headers: { cookie: `${cookie}; app=1` },
    });
    expect(await textOf(ping)).toBe('pong - app=1 ?x=1');
    const keyed = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/8000/ping`, {
      headers: { authorization: `Bearer ${keyA}` },
    });
    expect(await textOf(keyed)).toBe('pong - - -');
    // Without key, token or cookie: refused.
    expect((await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/8000/`)).statusCode).toBe(401);
  });

  it('host form: the app lives at / and loads /app.js with the cookie its token left', async () => {
    const url = await urlOf(id, 8000, '?form=host');
    const host = new URL(url);
    expect(host.hostname).toMatch(/^8000-[a-z0-9-]{1,50}\.localhost$/);
    expect(host.port).toBe(new URL(s.url).port);
    const page = await rawRequest(url);
    const html = await textOf(page);
    expect(page.statusCode, html).toBe(200);
    expect(html).toContain('<script src="/app.js">');
    expect(page.headers['set-cookie']?.[0]).toContain('Path=/;');
    expect(page.headers['set-cookie']?.[0]).not.toContain('Domain');
    const script = await rawRequest(`${host.origin}/app.js`, { headers: { cookie: cookieOf(page) } });
    expect(script.statusCode).toBe(200);
    expect(await textOf(script)).toContain('previewApp');
    expect((await rawRequest(`${host.origin}/app.js`)).statusCode).toBe(401);
  });

  it('streams a 50 MB download and a 20 MB upload whole', async () => {
    const url = new URL(await urlOf(id, 8000));
    const big = await rawRequest(`${url.origin}${url.pathname}big?mb=50${url.search.replace('?', '&')}`);
    expect(big.statusCode).toBe(200);
    expect(big.headers['transfer-encoding']).toBe('chunked');
    expect(await countBytes(big)).toBe(50 * MB);
    async function* twenty() {
      for (let i = 0; i < 20; i += 1) yield Buffer.alloc(MB, 98);
    }
    const up = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/8000/count`, {
      method: 'POST',
      headers: { authorization: `Bearer ${keyA}`, 'content-type': 'application/octet-stream' },
      body: twenty(),
    });
    expect(await textOf(up)).toBe(String(20 * MB));
  });

  it('relays server-sent events as they come', async () => {
    const sse = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/8000/sse`, {
      headers: { authorization: `Bearer ${keyA}`, accept: 'text/event-stream' },
    });
    expect(sse.headers['content-type']).toBe('text/event-stream');
    let text = '';
    for await (const chunk of sse) {
      text += (chunk as Buffer).toString('utf8');
      if (text.includes('data: tick 3')) break;
    }
    sse.destroy();
    expect(text).toContain('data: tick 1\n\n');
  });

  it('relays a WebSocket echo, opened with the token (path form) and with the cookie (host form)', async () => {
    const echo = async (wsUrl: string, headers: Record<string, string> = {}) => {
      const socket = new WebSocket(wsUrl, { headers, lookup: loopbackLookup });
      await new Promise((resolve, reject) => {
        socket.once('open', resolve);
        socket.once(
          'unexpected-response',
          (_req, res) =>
            void textOf(res).then((text) => reject(new Error(`upgrade refused: ${res.statusCode} ${text}`))),
        );
        socket.once('error', reject);
      });
      const answer = new Promise<string>((resolve) => socket.once('message', (d) => resolve(d.toString())));
      socket.send('hello');
      const text = await answer;
      socket.close();
      return text;
    };
    const path = await urlOf(id, 8000);
    expect(await echo(path.replace(/^http/, 'ws'))).toBe('echo: hello');
    const host = await urlOf(id, 8000, '?form=host');
    const cookie = cookieOf(await rawRequest(host));
    expect(await echo(`${new URL(host).origin.replace(/^http/, 'ws')}/socket`, { cookie })).toBe(
      'echo: hello',
    );
    await expect(echo(`${s.url.replace(/^http/, 'ws')}/v1/sandboxes/${id}/proxy/8000/`)).rejects.toThrow(
      '401',
    );
  });

  it("refuses a token of another port or sandbox, another tenant's key, and names a dead port", async () => {
    const token = new URL(await urlOf(id, 8000)).searchParams.get('token');
    const otherPort = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/8001/?token=${token}`);
    expect(otherPort.statusCode).toBe(403);
    expect(await textOf(otherPort)).toContain('another sandbox or port');

    const other = await createSandbox();
    const otherSandbox = await rawRequest(`${s.url}/v1/sandboxes/${other}/proxy/8000/?token=${token}`);
    expect(otherSandbox.statusCode).toBe(403);

    const tenantB = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/8000/`, {
      headers: { authorization: `Bearer ${keyB}` },
    });
    expect(tenantB.statusCode).toBe(404);
    expect((await s.request(`/v1/sandboxes/${id}/ports/8000/url`, { key: keyB })).status).toBe(404);

    const dead = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/8009/`, {
      headers: { authorization: `Bearer ${keyA}` },
    });
    expect(dead.statusCode).toBe(502);
    expect(dead.headers['content-type']).toContain('application/problem+json');
    expect(JSON.parse(await textOf(dead))).toMatchObject({
      type: 'urn:sandstream:problem:port-unreachable',
      port: 8009,
    });
    await s.request(`/v1/sandboxes/${other}`, { method: 'DELETE', key: keyA });
  }, 120_000);

  it('answers 409 for a sandbox not ready yet; a public port opens to anyone; closing ends its connections', async () => {
    const pending = await createSandbox(false);
    const early = await s.request(`/v1/sandboxes/${pending}/ports/8000/url`, { key: keyA });
    expect(early.status).toBe(409);
    expect(((await early.json()) as { type: string }).type).toBe('urn:sandstream:problem:sandbox-not-ready');
    await vi.waitUntil(
      async () =>
        ((await (await s.request(`/v1/sandboxes/${pending}`, { key: keyA })).json()) as { state: string })
          .state === 'ready',
      { timeout: 60_000, interval: 250 },
    );
    await serve(pending, 8000);
    const open = await urlOf(pending, 8000, '?public=true');
    expect(open).not.toContain('token=');
    expect((await rawRequest(`${open}ping`)).statusCode).toBe(200);

    const sse = await rawRequest(`${open}sse`);
    expect(sse.statusCode).toBe(200);
    const ended = (async () => {
      try {
        for await (const _chunk of sse) {
          // read until the proxy ends it
        }
      } catch {
        // a reset ends it too
      }
      return true;
    })();
    await s.request(`/v1/sandboxes/${pending}`, { method: 'DELETE', key: keyA });
    await expect(Promise.race([ended, new Promise((r) => setTimeout(() => r(false), 20_000))])).resolves.toBe(
      true,
    );
  }, 180_000);

  it('sandbox.ports.url works through both SDK transports', async () => {
    const overHttp = new SandstreamClient({ url: s.url, apiKey: keyA });
    const overRedis = new SandstreamClient({
      redisUrl: s.redisUrl,
      namespace: s.stack.namespace,
      previewUrl: s.url,
    });
    try {
      // Over Redis there is no tenant to resolve ids in: a client there names the internal id.
      for (const [client, named] of [
        [overHttp, id],
        [overRedis, scopedJobId('preview', id)],
      ] as const) {
        const url = await client.sandboxes.handle(named).ports.url(8000, { form: 'host' });
        const page = await rawRequest(url);
        expect(page.statusCode, url).toBe(200);
        expect(await textOf(page)).toContain('/app.js');
      }
      await expect(overHttp.sandboxes.handle(id).ports.url(0)).rejects.toThrow('port must be at least 1');
    } finally {
      await overHttp.close();
      await overRedis.close();
    }
  });

  it('sandstream sandbox url prints the URL alone, over HTTP and over Redis', async () => {
    const overHttp = await runCli(
      ['sandbox', 'url', id, '8000', '--host', '--url', s.url, '--api-key', keyA],
      {},
    );
    expect(overHttp.stderr).toBe('');
    expect(overHttp.status).toBe(0);
    expect(overHttp.stdout).toMatch(/^http:\/\/8000-[a-z0-9-]+\.localhost:\d+\/\?token=[\w.-]+\n$/);
    expect((await rawRequest(overHttp.stdout.trim())).statusCode).toBe(200);
    const overRedis = await runCli(
      [
        'sandbox',
        'url',
        scopedJobId('preview', id),
        '8000',
        '--redis-url',
        s.redisUrl,
        '--namespace',
        s.stack.namespace,
      ],
      { SANDSTREAM_API_URL: s.url },
    );
    expect(overRedis.status, overRedis.stderr).toBe(0);
    expect(
      overRedis.stdout.startsWith(`${s.url}/v1/sandboxes/${scopedJobId('preview', id)}/proxy/8000/?token=`),
    ).toBe(true);
    expect((await rawRequest(overRedis.stdout.trim())).statusCode).toBe(200);
    const bad = await runCli(['sandbox', 'url', id, '70000', '--url', s.url, '--api-key', keyA], {});
    expect(bad.stderr).toContain('the port is 1..65535');
  });
});
