import { ApiKeyStore, createKeySpace } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import { connectTestRedis, deleteNamespaceKeys, uniqueNamespace } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiContext } from './api-context.js';
import { buildApi } from './app.js';
import { Principals } from './principal.js';
import { WorkQueues } from './work-queues.js';

type Responses = Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
interface OpenApi {
  paths: Record<string, Record<string, { responses?: Responses }>>;
  components: { schemas: Record<string, { oneOf?: { properties: { event: { const: string } } }[] }> };
}

const PROBLEM = '#/components/schemas/Problem';

// The API's served description, built in-process on the shared Redis (one key, under its own namespace):
// the problem answers come from one definition, the event streams say what they send.
describe('the OpenAPI document', () => {
  const namespace = uniqueNamespace('api-doc');
  const redis = connectTestRedis();
  const keys = createKeySpace(namespace);
  const client = new SandstreamClient({ redis, namespace });
  const queues = new WorkQueues(redis, keys);
  let app: Awaited<ReturnType<typeof buildApi>>;
  let doc: OpenApi;
  let adminKey = '';

  beforeAll(async () => {
    const store = new ApiKeyStore({ redis, keys });
    adminKey = (await store.create({ tenant: 'default', admin: true })).key;
    const ctx: ApiContext = {
      client,
      redis,
      queues,
      keys,
      principals: new Principals({ store, redis, keys, anonymous: 'off' }),
      templates: undefined,
      defaults: { template: undefined, image: 'sandstream/debian:bookworm' },
    };
    app = await buildApi(ctx, { bodyLimit: 1024 * 1024, rateLimitPerMinute: 600 });
    doc = (await app.inject({ method: 'GET', url: '/openapi.json' })).json();
  });
  afterAll(async () => {
    await app?.close();
    await queues.close();
    await client.close();
    await deleteNamespaceKeys(redis, namespace);
    redis.disconnect();
  });

  const operations = () =>
    Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([method, op]) => ({
        at: `${method.toUpperCase()} ${path}`,
        responses: op.responses ?? {},
      })),
    );

  it('every operation answers 400, 401, 429 and 503 with the one Problem schema, and every problem status refers to it', () => {
    const ops = operations();
    expect(ops.length).toBeGreaterThan(20);
    for (const { at, responses } of ops) {
      for (const status of ['400', '401', '429', '503'])
        expect(responses[status]?.content?.['application/json']?.schema?.$ref, `${at} ${status}`).toBe(
          PROBLEM,
        );
      for (const [status, response] of Object.entries(responses)) {
        if (Number(status) >= 400)
          expect(response.content?.['application/json']?.schema?.$ref, `${at} ${status}`).toBe(PROBLEM);
      }
    }
  });

  it('every event stream is text/event-stream with its events described', () => {
    const streams = operations().filter(({ responses }) => responses['200']?.content?.['text/event-stream']);
    expect(streams.map((s) => s.at).sort()).toEqual([
      'GET /api/sandbox/{id}/events',
      'GET /v1/events',
      'GET /v1/jobs/{id}/events',
      'GET /v1/sandboxes/{id}/events',
      'GET /v1/sandboxes/{id}/processes/{pid}/output',
      'POST /api/sandbox/{id}/code',
      'POST /api/sandbox/{id}/exec',
      'POST /v1/sandboxes/{id}/code',
      'POST /v1/sandboxes/{id}/exec',
      'POST /v1/sandboxes/{id}/watch',
    ]);
    const eventsOf = (name: string) =>
      (doc.components.schemas[name]?.oneOf ?? []).map((e) => e.properties.event.const).sort();
    expect(eventsOf('CommandEvent')).toEqual(['error', 'gap', 'result', 'started', 'stderr', 'stdout']);
    expect(eventsOf('ListEvent')).toEqual(['changed', 'created', 'error', 'reload', 'removed']);
    expect(eventsOf('CodeEvent')).toEqual(['error', 'execution', 'result', 'started', 'stderr', 'stdout']);
    expect(eventsOf('TimelineEvent')).toEqual(
      [
        'cancel-requested',
        'end',
        'error',
        'gap',
        'output',
        'progress',
        'state',
        'step-completed',
        'step-started',
      ].sort(),
    );
    for (const { at, responses } of streams) {
      const ref = responses['200']?.content?.['text/event-stream']?.schema?.$ref;
      expect(ref, at).toBe(
        `#/components/schemas/${at === 'GET /v1/events' ? 'List' : at.startsWith('GET ') && at.endsWith('/events') ? 'Timeline' : at.endsWith('/code') ? 'Code' : 'Command'}Event`,
      );
    }
    // The exec still documents its JSON answer beside the stream.
    const exec = doc.paths['/v1/sandboxes/{id}/exec']?.post?.responses?.['200'];
    expect(exec?.content?.['application/json']?.schema?.$ref).toBe('#/components/schemas/ExecResult');
    const code = doc.paths['/v1/sandboxes/{id}/code']?.post?.responses?.['200'];
    expect(code?.content?.['application/json']?.schema?.$ref).toBe('#/components/schemas/Execution');
  });

  it('the plugins apply to every route: no key is a 401 problem, an unknown route a 404 problem', async () => {
    const noKey = await app.inject({ method: 'GET', url: '/v1/sandboxes' });
    expect(noKey.statusCode).toBe(401);
    expect(noKey.json()).toMatchObject({ type: 'urn:sandstream:problem:unauthorized' });
    const none = await app.inject({
      method: 'GET',
      url: '/v1/nothing-here',
      headers: { authorization: `Bearer ${adminKey}` },
    });
    expect(none.json()).toMatchObject({ status: 404, type: 'urn:sandstream:problem:not-found' });
  });
});
