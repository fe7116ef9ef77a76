import { createKeySpace, READY_MARK_FIELD } from '@sandstream/bus';
import { SandboxTimeoutError, SandstreamClient } from '@sandstream/client';
import { deleteNamespaceKeys, liveBackends, testRedisUrl, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Transport, type TransportView, viewThrough } from '../helpers/sdk-transports.js';
import { type Stack, startStack } from '../helpers/services-stack.js';

// create() waits for readiness by event: the step-dispatcher's `ready` entry on the sandbox's
// events stream wakes the wait (libs/client sandbox-ready-watch.ts). With the safety-net re-read
// set to a minute, on the SDK over Redis and on the API's own wait over HTTP, a create that
// resolves within the test's timeout was woken by the event, not by a re-read of the record.

const redisUrl = testRedisUrl();
const RECHECK_MS = 60_000;
const [inProcess] = liveBackends().filter((backend) => backend.name === 'in-process');
const transports: Transport[] = ['redis', 'http'];

describe.each(transports)('readiness by event (over %s)', (transport) => {
  let stack: Stack;
  let view: TransportView;
  let client: SandstreamClient;
  const redis = new Redis(redisUrl);
  beforeAll(async () => {
    stack = await startStack({
      label: `ready-${transport}`,
      // The API's own wait (HTTP create waits server-side) gets the same minute-long safety net.
      env: { ...inProcess?.env, API_READY_RECHECK_MS: String(RECHECK_MS) },
    });
    view = await viewThrough(stack, transport, redisUrl);
    client =
      transport === 'redis'
        ? new SandstreamClient({ redisUrl, namespace: stack.namespace, readyRecheckMs: RECHECK_MS })
        : view.client;
  });
  afterAll(async () => {
    if (transport === 'redis') await client?.close();
    await view?.stop();
    await stack?.stop();
    redis.disconnect();
  });

  it('resolves create once the record turns ready, woken by the dispatcher’s ready entry', async () => {
    for (let i = 0; i < 3; i++) {
      const id = `${stack.namespace}-s${i}`;
      await using sandbox = await client.sandboxes.create({ id, image: inProcess?.image ?? 'node' });
      const record = await client.sandboxes.get(sandbox.id);
      expect(record?.state).toBe('ready');
      expect(record?.readyAt).toBeTypeOf('number');
      // The wake-up is on the stream, stamped with the record's readyAt; followers skip it.
      const entries = await redis.xrange(createKeySpace(stack.namespace).sandbox(id).events, '-', '+');
      const marks = entries.filter(([, fields]) => fields[0] === READY_MARK_FIELD);
      expect(marks.map(([, fields]) => Number(fields[1]))).toEqual([record?.readyAt]);
      const items = [];
      for await (const item of client.follow(id, { untilNow: true })) items.push(item);
      expect(items.every((item) => item.type === 'state')).toBe(true);
    }
  }, 40_000);

  it('resolves connect to a sandbox that becomes ready later by event, reading no record on the way', async () => {
    const id = `${stack.namespace}-c`;
    await client.sandboxes.create({ id, image: inProcess?.image ?? 'node' }, { wait: false });
    // Every request the client sends while connecting: over HTTP one wait, no polls of the record.
    const requests: string[] = [];
    const realFetch = globalThis.fetch;
    globalThis.fetch = (input, init) => {
      requests.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
      return realFetch(input, init);
    };
    try {
      await using sandbox = await client.sandboxes.connect(id);
      if (transport === 'http') {
        expect(requests).toEqual([`POST /v1/sandboxes/${encodeURIComponent(id)}/connect`]);
      }
      expect((await sandbox.exec(['true'])).exitCode).toBe(0);
    } finally {
      globalThis.fetch = realFetch;
    }
  }, 40_000);
});

describe('readiness by event, with nothing to wake it', () => {
  const namespace = uniqueNamespace('ready-none');
  const redis = new Redis(redisUrl);
  // No services in this namespace: the sandbox stays queued, so no event ever comes. The
  // minute-long safety net must not hold the wait past its own bound or its abort.
  const client = new SandstreamClient({ redis, namespace, readyRecheckMs: RECHECK_MS, onWarning: () => {} });
  afterAll(async () => {
    await client.close();
    await deleteNamespaceKeys(redis, namespace);
    redis.disconnect();
  });

  it('ends at its timeout with the state it saw, and at an abort with the abort’s reason', async () => {
    await expect(
      client.sandboxes.create({ id: `${namespace}-t`, image: 'node' }, { timeoutSeconds: 1 }),
    ).rejects.toThrow(SandboxTimeoutError);
    await expect(
      client.sandboxes.create({ id: `${namespace}-t`, image: 'node' }, { timeoutSeconds: 1 }),
    ).rejects.toThrow(/not ready after 1 s \(it is queued\)/);
    const controller = new AbortController();
    const created = client.sandboxes.create(
      { id: `${namespace}-a`, image: 'node' },
      { signal: controller.signal },
    );
    setTimeout(() => controller.abort(new Error('caller gave up')), 200);
    await expect(created).rejects.toThrow('caller gave up');
  }, 20_000);
});
