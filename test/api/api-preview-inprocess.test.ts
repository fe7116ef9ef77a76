import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { freePort } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket, { WebSocketServer } from 'ws';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { cookieOf, loopbackLookup, rawRequest, textOf } from '../helpers/preview-fetch.js';

// Preview URLs on the in-process backend: the sandbox's processes share this machine's network,
// so the proxy reaches their port on the loopback (portAddress → 127.0.0.1).
const serverScript = readFileSync(fileURLToPath(new URL('../fixtures/preview-server.cjs', import.meta.url)));

let s: ApiStack;
let key = '';

/** A sandbox serving test/fixtures/preview-server.cjs; answers its id, port and URL maker. */
async function servingSandbox() {
  const id = await s.createSandbox(key);
  const port = await freePort();
  await s.request(`/v1/sandboxes/${id}/fs?path=/server.cjs`, {
    method: 'PUT',
    key,
    headers: { 'content-type': 'application/octet-stream' },
    body: serverScript,
  });
  const started = await s.request(`/v1/sandboxes/${id}/processes`, {
    method: 'POST',
    key,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ command: process.execPath, args: ['server.cjs', String(port)] }),
  });
  expect(started.status, await started.text()).toBe(201);
  const urlOf = async (query: string) =>
    (
      (await (await s.request(`/v1/sandboxes/${id}/ports/${port}/url${query}`, { key })).json()) as {
        url: string;
      }
    ).url;
  const path = await urlOf('');
  await vi.waitUntil(async () => (await rawRequest(path)).statusCode === 200, {
    timeout: 20_000,
    interval: 200,
  });
  return { id, port, urlOf };
}

describe('preview URLs in-process (issue 31 §1)', () => {
  beforeAll(async () => {
    s = await startApiStack({ label: 'preview-inproc', apiEnv: { API_ANONYMOUS: 'off' } });
    key = (await s.key('preview')).key;
  }, 120_000);

  afterAll(async () => {
    await s?.stop();
  }, 60_000);

  it('serves the page and its /app.js through both forms from a node server in the sandbox', async () => {
    const { id, urlOf } = await servingSandbox();
    const record = (await (await s.request(`/v1/sandboxes/${id}`, { key })).json()) as {
      sandbox: { backend: string; host: string };
    };
    expect(record.sandbox).toMatchObject({ backend: 'inprocess', host: '127.0.0.1' });
    const path = await urlOf('');
    expect(await textOf(await rawRequest(path))).toContain('preview ok');
    const host = await urlOf('?form=host');
    const page = await rawRequest(host);
    expect(await textOf(page)).toContain('/app.js');
    const script = await rawRequest(`${new URL(host).origin}/app.js`, {
      headers: { cookie: cookieOf(page) },
    });
    expect(await textOf(script)).toContain('previewApp');
    await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE', key });
  }, 120_000);

  it("runs path-form pages sandboxed (CSP, no allow-same-origin), beside the app's own policy; the host form is left alone", async () => {
    const { id, port, urlOf } = await servingSandbox();
    const auth = { authorization: `Bearer ${key}` };
    const policies = (answer: { headers: Record<string, string | string[] | undefined> }) =>
      String(answer.headers['content-security-policy'] ?? '')
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean);
    const page = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/${port}/`, { headers: auth });
    expect(page.statusCode).toBe(200);
    const [policy] = policies(page);
    expect(policy).toMatch(/^sandbox allow-scripts allow-forms allow-popups\b/);
    expect(policy).not.toContain('allow-same-origin');
    // Every path-form answer, scripts and subpaths too.
    expect(
      policies(await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/${port}/app.js`, { headers: auth })),
    ).toEqual([policy]);
    // The app's own policy stays, ours is added beside it (both are enforced).
    expect(
      policies(await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/${port}/own-csp`, { headers: auth })),
    ).toEqual(["img-src 'self'", policy]);
    // The host form is an origin of its own: nothing added.
    const host = await rawRequest(await urlOf('?form=host'));
    expect(host.statusCode).toBe(200);
    expect(host.headers['content-security-policy']).toBeUndefined();
    await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE', key });
  }, 120_000);

  it('closing the sandbox closes its proxied WebSocket and SSE, and its host-form URL and public port go with it', async () => {
    // The app listens in this process, on the loopback the in-process sandbox's address names:
    // it outlives the sandbox, so only the proxy closing its connections ends them.
    const upstreamClosed: string[] = [];
    const server = createServer((req, res) => {
      if (req.url === '/sse') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const timer = setInterval(() => res.write('data: tick\n\n'), 100);
        req.once('close', () => {
          clearInterval(timer);
          upstreamClosed.push('sse');
        });
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><p>kept alive</p>');
    });
    const wss = new WebSocketServer({ server });
    wss.on('connection', (ws) => {
      ws.on('message', (data) => ws.send(`echo: ${data.toString()}`));
      ws.once('close', () => upstreamClosed.push('websocket'));
    });
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    try {
      const id = await s.createSandbox(key);
      const made = await s.request(`/v1/sandboxes/${id}/ports/${port}/url?public=true&form=host`, { key });
      const open = ((await made.json()) as { url: string }).url;
      expect((await rawRequest(open)).statusCode).toBe(200);
      const socket = new WebSocket(`${s.url.replace(/^http/, 'ws')}/v1/sandboxes/${id}/proxy/${port}/`, {
        headers: { authorization: `Bearer ${key}` },
        lookup: loopbackLookup,
      });
      await new Promise((resolve, reject) => {
        socket.once('open', resolve);
        socket.once('error', reject);
      });
      const echoed = new Promise<string>((resolve) => socket.once('message', (d) => resolve(d.toString())));
      socket.send('hello');
      expect(await echoed).toBe('echo: hello');
      const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
      const sse = await rawRequest(`${s.url}/v1/sandboxes/${id}/proxy/${port}/sse`, {
        headers: { authorization: `Bearer ${key}` },
      });
      expect(sse.statusCode).toBe(200);
      const sseEnded = (async () => {
        try {
          for await (const _chunk of sse) {
            // read until the proxy ends it
          }
        } catch {
          // a reset ends it too
        }
        return true;
      })();

      expect((await s.request(`/v1/sandboxes/${id}`, { method: 'DELETE', key })).status).toBeLessThan(300);
      const bounded = <T>(work: Promise<T>) =>
        Promise.race([work, new Promise<'still open'>((r) => setTimeout(() => r('still open'), 30_000))]);
      expect(typeof (await bounded(closed))).toBe('number');
      expect(await bounded(sseEnded)).toBe(true);
      // Both ends: the proxy's connections to the app are closed too.
      await vi.waitUntil(() => upstreamClosed.length === 2, { timeout: 10_000, interval: 50 });
      expect(upstreamClosed.sort()).toEqual(['sse', 'websocket']);
      // Its destroy freed the label and the public port: the host-form URL names no sandbox now.
      await vi.waitUntil(async () => (await rawRequest(open)).statusCode === 404, {
        timeout: 30_000,
        interval: 200,
      });
    } finally {
      for (const client of wss.clients) client.terminate();
      wss.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  }, 120_000);
});
