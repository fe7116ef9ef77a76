import { liveBackends } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import WebSocket from 'ws';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';

// The API on the Docker backend, as the quick start runs it where an engine is: a sandbox made
// with no image or template (seed 003's `{"id": …}`) gets the operator's default, the local
// Debian image, and its shell works over the WebSocket.
const docker = liveBackends().find((b) => b.name === 'docker');
const DEFAULT_IMAGE = docker?.image ?? 'sandstream/debian:bookworm';

let s: ApiStack;

describe.skipIf(!docker)('HTTP API on Docker', () => {
  beforeAll(async () => {
    s = await startApiStack({
      label: 'api-docker',
      env: docker?.env ?? {},
      apiEnv: { API_DEFAULT_IMAGE: DEFAULT_IMAGE },
    });
  }, 180_000);

  afterAll(async () => {
    await s?.stop();
  }, 120_000);

  it("seed 003's create gives the default Debian image; exec and the WebSocket shell work in it", async () => {
    const id = `${s.stack.namespace}-seed`;
    const created = await s.request('/api/sandbox', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id }),
    });
    const record = (await created.json()) as {
      state: string;
      spec: { image: string };
      sandbox: { backend: string };
    };
    expect(created.status, JSON.stringify(record)).toBe(201);
    expect(record).toMatchObject({
      state: 'ready',
      spec: { image: DEFAULT_IMAGE },
      sandbox: { backend: 'docker' },
    });

    const exec = await s.request(`/api/sandbox/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: '. /etc/os-release && echo $ID $VERSION_CODENAME' }),
    });
    expect(await exec.json()).toMatchObject({ exitCode: 0, stdout: 'debian bookworm\n' });

    const socket = new WebSocket(`${s.url.replace('http', 'ws')}/v1/sandboxes/${id}/shell`);
    let output = '';
    socket.on('message', (data: Buffer, isBinary: boolean) => {
      if (isBinary) output += data.toString('utf8');
    });
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    socket.send(JSON.stringify({ type: 'input', data: 'cd /tmp\npwd\n' }));
    await vi
      .waitUntil(() => /[\r\n]\/tmp\r\n/.test(output), { timeout: 30_000, interval: 100 })
      .catch(() => {
        throw new Error(`no /tmp in ${JSON.stringify(output)}`);
      });
    socket.close();
    const closed = await s.request(`/api/sandbox/${id}`, { method: 'DELETE' });
    expect(((await closed.json()) as { state: string }).state).toBe('closed');
  }, 180_000);
});
