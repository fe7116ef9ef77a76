import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { freePort } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { cookieOf, rawRequest, textOf } from '../helpers/preview-fetch.js';

// Preview URLs on the in-process backend: the sandbox's processes share this machine's network,
// so the proxy reaches their port on the loopback (portAddress → 127.0.0.1).
const serverScript = readFileSync(fileURLToPath(new URL('../fixtures/preview-server.cjs', import.meta.url)));

let s: ApiStack;
let key = '';

describe('preview URLs in-process (issue 31 §1)', () => {
  beforeAll(async () => {
    s = await startApiStack({ label: 'preview-inproc', apiEnv: { API_ANONYMOUS: 'off' } });
    key = (await s.key('preview')).key;
  }, 120_000);

  afterAll(async () => {
    await s?.stop();
  }, 60_000);

  it('serves the page and its /app.js through both forms from a node server in the sandbox', async () => {
    const id = await s.createSandbox(key);
    const record = (await (await s.request(`/v1/sandboxes/${id}`, { key })).json()) as {
      sandbox: { backend: string; host: string };
    };
    expect(record.sandbox).toMatchObject({ backend: 'inprocess', host: '127.0.0.1' });
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
});
