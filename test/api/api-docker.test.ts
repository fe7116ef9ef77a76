import { execFileSync } from 'node:child_process';
import { createKeySpace, scopedJobId } from '@sandstream/bus';
import { dockerJobNames } from '@sandstream/sandbox';
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

  it('two tenants both have one id: two containers and two Redis users named by internal ids, each exec in its own', async () => {
    const id = 'same-name';
    const users = new Map<string, string>();
    for (const tenant of ['acme', 'globex']) {
      const { key } = await s.key(tenant);
      users.set(tenant, key);
      const created = await s.request('/api/sandbox', {
        method: 'POST',
        key,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ id }),
      });
      const record = (await created.json()) as { id: string; sandbox: { id: string } };
      expect(created.status, JSON.stringify(record)).toBe(201);
      expect(record.id).toBe(id);
      // The container is named for the tenant's internal id, as any job id names its container.
      const internal = scopedJobId(tenant, id);
      const name = execFileSync('docker', ['inspect', '--format', '{{.Name}}', record.sandbox.id], {
        encoding: 'utf8',
      }).trim();
      expect(name).toBe(`/${dockerJobNames(internal).toolchain}`);
      // So is its Redis user (kept in the record to restore it after a restart).
      const user = await s.stack.redis.hget(createKeySpace(s.stack.namespace).job(internal), 'sandboxUser');
      expect(user ?? '').toContain(internal);
    }
    for (const [tenant, key] of users) {
      await s.request(`/api/sandbox/${id}/fs`, {
        method: 'PUT',
        key,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ path: '/owner', content: tenant }),
      });
    }
    for (const [tenant, key] of users) {
      const exec = await s.request(`/api/sandbox/${id}/exec`, {
        method: 'POST',
        key,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ command: 'cat owner' }),
      });
      expect(await exec.json()).toMatchObject({ exitCode: 0, stdout: `${tenant}\n` });
    }
    for (const key of users.values()) await s.request(`/api/sandbox/${id}`, { method: 'DELETE', key });
  }, 180_000);
});
