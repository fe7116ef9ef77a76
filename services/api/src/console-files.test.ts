import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiKeyStore, createKeySpace } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import { connectTestRedis, deleteNamespaceKeys, uniqueNamespace } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiContext } from './api-context.js';
import { buildApi } from './app.js';
import { Principals } from './principal.js';
import { WorkQueues } from './work-queues.js';

// The web console's files as the API serves them (built in-process on the shared Redis, under a
// namespace of its own): public, same-origin CSP, no API route shadowed; and GET /v1/auth/me.
describe('the web console files and /v1/auth/me', () => {
  const namespace = uniqueNamespace('api-console');
  const redis = connectTestRedis();
  const keys = createKeySpace(namespace);
  const client = new SandstreamClient({ redis, namespace });
  const queues = new WorkQueues(redis, keys);
  const dir = mkdtempSync(join(tmpdir(), 'console-files-'));
  let apps: Awaited<ReturnType<typeof buildApi>>[] = [];
  let key = '';

  const build = async (consoleDir: string) => {
    const store = new ApiKeyStore({ redis, keys });
    key ||= (await store.create({ tenant: 'acme', admin: false })).key;
    const ctx: ApiContext = {
      client,
      redis,
      queues,
      keys,
      principals: new Principals({ store, redis, keys, anonymous: 'off' }),
      templates: undefined,
      defaults: { template: undefined, image: 'sandstream/debian:bookworm' },
    };
    const app = await buildApi(ctx, { bodyLimit: 1024 * 1024, rateLimitPerMinute: 600, consoleDir });
    apps.push(app);
    return app;
  };

  beforeAll(() => {
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>console</title>');
    writeFileSync(join(dir, 'assets', 'index-abc.js'), 'console.log(1)');
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.close()));
    apps = [];
    await queues.close();
    await client.close();
    await deleteNamespaceKeys(redis, namespace);
    redis.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves index.html at / and its assets to anyone, with a CSP that keeps every request on this origin', async () => {
    const app = await build(dir);
    const page = await app.inject({ method: 'GET', url: '/' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<title>console</title>');
    expect(page.headers['content-type']).toMatch(/text\/html/);
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(page.headers['cache-control']).toBe('no-cache');
    const asset = await app.inject({ method: 'GET', url: '/assets/index-abc.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['cache-control']).toContain('immutable');
  });

  it('shadows no API path: an unknown path is still a 401 or 404 problem, /docs still answers', async () => {
    const app = await build(dir);
    expect((await app.inject({ method: 'GET', url: '/assets/missing.js' })).statusCode).toBe(404);
    const unknown = await app.inject({
      method: 'GET',
      url: '/v1/nothing-here',
      headers: { authorization: `Bearer ${key}` },
    });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.headers['content-type']).toMatch(/application\/problem\+json/);
    expect((await app.inject({ method: 'GET', url: '/v1/jobs' })).statusCode).toBe(401);
    expect((await app.inject({ method: 'GET', url: '/docs/' })).statusCode).toBe(200);
  });

  it('says how to build the console when it is not built', async () => {
    const app = await build(join(dir, 'absent'));
    const page = await app.inject({ method: 'GET', url: '/' });
    expect(page.statusCode).toBe(404);
    expect(page.json().detail).toContain('npm run build');
  });

  it('GET /v1/auth/me names the key: its tenant and whether it is an admin', async () => {
    const app = await build(dir);
    const me = await app.inject({
      method: 'GET',
      url: '/v1/auth/me',
      headers: { authorization: `Bearer ${key}` },
    });
    expect(me.statusCode).toBe(200);
    expect(me.json()).toMatchObject({ tenant: 'acme', admin: false });
    expect((await app.inject({ method: 'GET', url: '/v1/auth/me' })).statusCode).toBe(401);
  });
});
