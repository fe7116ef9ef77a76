import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ApiKeyStore, BuiltTemplates, createKeySpace, type TemplateInfo } from '@sandstream/bus';
import {
  FileTemplateError,
  SandstreamApiError,
  SandstreamClient,
  SandstreamOptionsError,
  TemplateNotFoundError,
} from '@sandstream/client';
import {
  connectTestRedis,
  deleteNamespaceKeys,
  freePort,
  type RunningService,
  startService,
  uniqueNamespace,
} from '@sandstream/test-support';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-run.js';
import { OpenApiDocument } from '../helpers/openapi-check.js';
import { apiClient } from './api-client.js';

// Templates over the HTTP API, the SDK's two transports and the CLI's: the API process alone
// (nothing here starts a sandbox) on the shared Redis under a namespace of its own, with a
// templates file, and built templates registered as `sandstream template build` registers them.

const namespace = uniqueNamespace('api-tmpl');
const keys = createKeySpace(namespace);
const redis = connectTestRedis();
const registry = new BuiltTemplates(redis, keys);
// `warm` is in the file and built too (the file wins: the built one is shadowed); `plain` only there.
const templatesFile = join(mkdtempSync(join(tmpdir(), 'api-templates-')), 'templates.yaml');
writeFileSync(
  templatesFile,
  `templates:
  plain:
    image: debian:bookworm-slim
  warm:
    image: sandstream/debian:bookworm
`,
);

let api: RunningService;
let url: string;
let admin: string;
let tenant: string;
let call: ReturnType<typeof apiClient>;
const builtAt = Date.UTC(2026, 10, 1, 12, 0, 0);

const register = (name: string) =>
  registry.register({
    name,
    image: `sandstream-template/${name}:0123456789ab`,
    imageId: `sha256:${'a'.repeat(64)}`,
    builtAt,
  });

beforeAll(async () => {
  const port = await freePort();
  api = await startService('api', {
    SANDSTREAM_NAMESPACE: namespace,
    SANDSTREAM_TEMPLATES_FILE: templatesFile,
    API_PORT: String(port),
    API_ANONYMOUS: 'loopback',
    API_DEFAULT_IMAGE: 'debian:bookworm-slim',
  });
  url = `http://127.0.0.1:${port}`;
  const store = new ApiKeyStore({ redis, keys });
  admin = (await store.create({ tenant: 'default', admin: true })).key;
  tenant = (await store.create({ tenant: 'acme' })).key;
  const doc = await OpenApiDocument.load(
    (await (await fetch(`${url}/openapi.json`)).json()) as Record<string, unknown>,
  );
  call = apiClient(
    {
      request: (path, init = {}) => {
        const { key, ...rest } = init;
        const headers = new Headers(rest.headers);
        if (key !== undefined) headers.set('authorization', `Bearer ${key}`);
        return fetch(`${url}${path}`, { ...rest, headers });
      },
    },
    doc,
  );
}, 60_000);

afterAll(async () => {
  await api?.stop(15_000);
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
  rmSync(dirname(templatesFile), { recursive: true, force: true });
}, 30_000);

beforeEach(async () => {
  await redis.del(keys.builtTemplates);
  await register('built-one');
  await register('warm');
});

const builtInfo = (name: string) => ({
  name,
  source: 'built',
  image: `sandstream-template/${name}:0123456789ab`,
  imageId: `sha256:${'a'.repeat(64)}`,
  createdAt: '2026-11-01T12:00:00.000Z',
});
const EVERY: TemplateInfo[] = [
  { name: 'plain', source: 'file', image: 'debian:bookworm-slim' },
  { name: 'warm', source: 'file', image: 'sandstream/debian:bookworm' },
  builtInfo('built-one') as TemplateInfo,
  { ...builtInfo('warm'), shadowed: true } as TemplateInfo,
];

describe('GET /v1/templates', () => {
  it("lists the file's templates and the built ones, with their source, image and creation time", async () => {
    const listed = await call<{ templates: TemplateInfo[] }>('GET', '/v1/templates', { key: tenant });
    expect(listed.status).toBe(200);
    expect(listed.body.templates).toEqual(EVERY);
  });
});

describe('DELETE /v1/templates/{name}', () => {
  it('is for admin keys: a tenant key and anonymous access are refused, and nothing is removed', async () => {
    for (const key of [tenant, undefined]) {
      const refused = await call<{ detail: string }>('DELETE', '/v1/templates/built-one', {
        ...(key ? { key } : {}),
      });
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toMatch(/admin keys/);
    }
    expect(await registry.get('built-one')).toBeDefined();
  });

  it('removes a built template (204), and then it is not found (404 naming it)', async () => {
    const removed = await call('DELETE', '/v1/templates/built-one', { key: admin });
    expect(removed.status).toBe(204);
    expect(await registry.get('built-one')).toBeUndefined();
    const again = await call<{ type: string; template: string; detail: string }>(
      'DELETE',
      '/v1/templates/built-one',
      { key: admin },
    );
    expect(again.status).toBe(404);
    expect(again.body).toMatchObject({
      type: 'urn:sandstream:problem:template-not-found',
      template: 'built-one',
      detail: 'no built template named "built-one"',
    });
  });

  it("refuses the file's template with 409 naming SANDSTREAM_TEMPLATES_FILE; a shadowed built one of the name goes", async () => {
    const file = await call<{ type: string; template: string; detail: string }>(
      'DELETE',
      '/v1/templates/plain',
      { key: admin },
    );
    expect(file.status).toBe(409);
    expect(file.body).toMatchObject({ type: 'urn:sandstream:problem:template-in-file', template: 'plain' });
    expect(file.body.detail).toMatch(/SANDSTREAM_TEMPLATES_FILE/);

    const shadowed = await call('DELETE', '/v1/templates/warm', { key: admin });
    expect(shadowed.status).toBe(204);
    const listed = await call<{ templates: TemplateInfo[] }>('GET', '/v1/templates', { key: admin });
    expect(listed.body.templates.map((t) => [t.name, t.source])).toEqual([
      ['plain', 'file'],
      ['warm', 'file'],
      ['built-one', 'built'],
    ]);
    // Only the file's is left: now that one is refused.
    expect((await call('DELETE', '/v1/templates/warm', { key: admin })).status).toBe(409);
  });

  it('refuses a name no template can have, and a query it does not take, naming the field', async () => {
    const bad = await call<{ errors: { field: string; rule: string }[] }>('DELETE', '/v1/templates/Bad', {
      key: admin,
    });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toEqual([{ field: 'params.name', rule: expect.stringMatching(/lower-case/) }]);
    const extra = await call<{ errors: { field: string; rule: string }[] }>(
      'DELETE',
      '/v1/templates/built-one?force=1',
      { key: admin },
    );
    expect(extra.status).toBe(400);
    expect(extra.body.errors?.[0]?.field).toMatch(/querystring/);
    expect(await registry.get('built-one')).toBeDefined();
  });
});

describe('client.templates', () => {
  it('over HTTP: the whole list; delete with its errors as over Redis', async () => {
    const client = new SandstreamClient({ url, apiKey: admin });
    try {
      expect(await client.templates.list()).toEqual(EVERY);
      await client.templates.delete('built-one');
      await expect(client.templates.delete('built-one')).rejects.toBeInstanceOf(TemplateNotFoundError);
      await expect(client.templates.delete('plain')).rejects.toBeInstanceOf(FileTemplateError);
      await expect(client.templates.delete('No Such')).rejects.toBeInstanceOf(SandstreamOptionsError);
    } finally {
      await client.close();
    }
    const asTenant = new SandstreamClient({ url, apiKey: tenant });
    try {
      const refused = await asTenant.templates.delete('warm').catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(SandstreamApiError);
      expect((refused as SandstreamApiError).status).toBe(403);
    } finally {
      await asTenant.close();
    }
  });

  it('over Redis: the built ones (the file is not in Redis); delete of an unknown name throws', async () => {
    const client = new SandstreamClient({ redis, namespace });
    try {
      expect(await client.templates.list()).toEqual([builtInfo('built-one'), builtInfo('warm')]);
      await client.templates.delete('warm');
      expect(await registry.get('warm')).toBeUndefined();
      await expect(client.templates.delete('warm')).rejects.toBeInstanceOf(TemplateNotFoundError);
    } finally {
      await client.close();
    }
  });
});

describe('sandstream template ls / rm --url', () => {
  const cli = (args: string[], key?: string) =>
    runCli([...args, '--url', url], {
      SANDSTREAM_API_KEY: key ?? '',
      REDIS_URL: 'redis://127.0.0.1:9',
    });

  it('ls: a header row and every template; --json the API list', async () => {
    const table = await cli(['template', 'ls'], tenant);
    expect(table.status, table.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME\s+SOURCE\s+IMAGE\s+CREATED$/);
    expect(lines.slice(1).map((l) => l.split(/\s+/).slice(0, 3))).toEqual([
      ['plain', 'file', 'debian:bookworm-slim'],
      ['warm', 'file', 'sandstream/debian:bookworm'],
      ['built-one', 'built', 'sandstream-template/built-one:0123456789ab'],
      ['warm', 'built', '(shadowed)'],
    ]);
    expect(lines[3]).toContain('2026-11-01T12:00:00.000Z');
    const json = await cli(['template', 'ls', '--json'], tenant);
    expect(json.status, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(EVERY);
  }, 60_000);

  it('rm: removes with an admin key; exits 4 when none, 1 for the file, 3 (the 403) for a tenant key', async () => {
    const removed = await cli(['template', 'rm', 'built-one'], admin);
    expect(removed.status, removed.stderr).toBe(0);
    expect(removed.stderr).toContain('removed template built-one');
    expect(await registry.get('built-one')).toBeUndefined();

    const none = await cli(['template', 'rm', 'built-one'], admin);
    expect(none.status).toBe(4);
    expect(none.stderr).toMatch(/no built template named "built-one"/);

    const file = await cli(['template', 'rm', 'plain'], admin);
    expect(file.status).toBe(1);
    expect(file.stderr).toMatch(/SANDSTREAM_TEMPLATES_FILE/);

    const asTenant = await cli(['template', 'rm', 'warm'], tenant);
    expect(asTenant.status).toBe(3);
    expect(asTenant.stderr).toMatch(/403 .*admin keys/);
    expect(await registry.get('warm')).toBeDefined();
  }, 60_000);
});
