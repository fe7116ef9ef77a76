import { NatsServer } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';
import { OpenApiDocument } from '../helpers/openapi-check.js';
import { apiClient } from './api-client.js';

// Snapshots and forks of a tenant's sandbox through the API (issues 28 §6 and 30): the ids a
// tenant gets back are its own — a fork is found by the id the fork call answered, a snapshot
// names the sandbox by the id its user gave — and another tenant finds none of them.

let s: ApiStack;
let nats: NatsServer;
let call: ReturnType<typeof apiClient>;
const keys = { acme: '', globex: '' };

beforeAll(async () => {
  nats = await NatsServer.start({ jetstream: true });
  s = await startApiStack({ label: 'api-snap-tenant', env: { NATS_URL: nats.url, LOG_ARCHIVE: 'off' } });
  const doc = await OpenApiDocument.load(
    (await (await fetch(`${s.url}/openapi.json`)).json()) as Record<string, unknown>,
  );
  call = apiClient(s, doc);
  keys.acme = (await s.key('acme')).key;
  keys.globex = (await s.key('globex')).key;
}, 180_000);

afterAll(async () => {
  await s?.stop();
  await nats?.stop();
}, 120_000);

describe("a tenant's snapshots and forks answer with its own ids", () => {
  it('forks are found by the ids the fork answered; the snapshot names the sandbox by its user id', async () => {
    const key = keys.acme;
    expect((await call('POST', '/v1/sandboxes', { key, json: { id: 'box' } })).status).toBe(201);
    expect(
      (await call('PUT', '/v1/sandboxes/box/fs?path=kept.txt', { key, body: 'before the fork' })).status,
    ).toBe(200);

    const snapshot = await call<{ snapshotId: string; fromSandbox: string }>(
      'POST',
      '/v1/sandboxes/box/snapshots',
      {
        key,
        json: { name: 'mine' },
      },
    );
    expect(snapshot.status, JSON.stringify(snapshot.body)).toBe(201);
    expect(snapshot.body.fromSandbox).toBe('box');
    const listed = await call<{ fromSandbox: string }[]>('GET', '/v1/sandboxes/box/snapshots', { key });
    expect(listed.body.map((x) => x.fromSandbox)).toEqual(['box']);

    const forked = await call<{ sandboxIds: string[] }>('POST', '/v1/sandboxes/box/fork', {
      key,
      json: { count: 2 },
    });
    expect(forked.status, JSON.stringify(forked.body)).toBe(201);
    expect(forked.body.sandboxIds).toHaveLength(2);
    for (const id of forked.body.sandboxIds) {
      expect(id.startsWith('t.'), id).toBe(false);
      const got = await call<{ id: string }>('GET', `/v1/sandboxes/${id}`, { key });
      expect(got.status, `GET ${id}`).toBe(200);
      expect(got.body.id).toBe(id);
      const read = await call<string>('GET', `/v1/sandboxes/${id}/fs?path=kept.txt`, { key });
      expect(read.status).toBe(200);
      expect(read.body).toBe('before the fork');
      // Another tenant: the same answer as an id nobody has.
      expect((await call('GET', `/v1/sandboxes/${id}`, { key: keys.globex })).status).toBe(404);
      expect((await call('DELETE', `/v1/sandboxes/${id}`, { key })).status).toBeLessThan(300);
    }
    expect(
      (await call('GET', `/v1/snapshots/${snapshot.body.snapshotId}`, { key: keys.globex })).status,
    ).toBe(404);
    expect((await call('DELETE', '/v1/sandboxes/box', { key })).status).toBeLessThan(300);
  }, 240_000);
});
