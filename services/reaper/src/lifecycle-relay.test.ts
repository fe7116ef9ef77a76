import { createKeySpace, JobStore, parseJobSpec } from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { connect, type Msg, type NatsConnection } from 'nats';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LifecycleRelay } from './lifecycle-relay.js';
import { fixedNats } from './nats-link.js';

const url = testRedisUrl();
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const logger = silentLogger('relay-test');
const redis = new Redis(url, { maxRetriesPerRequest: null });
let nats: NatsConnection;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  nats = await connect({ servers: natsUrl });
});

afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  await nats.close();
  redis.disconnect();
});

function setup() {
  const ns = `t-relay-${Math.random().toString(36).slice(2, 10)}`;
  const keys = createKeySpace(ns);
  const store = new JobStore({ redis, keys });
  const received: Msg[] = [];
  const sub = nats.subscribe(`sandstream.${ns}.>`, { callback: (_err, msg) => received.push(msg) });
  const relays: LifecycleRelay[] = [];
  const conns: Redis[] = [];
  const relay = (consumer: string, claimIdleMs = 30_000) => {
    const conn = new Redis(url, { maxRetriesPerRequest: null });
    conns.push(conn);
    const r = new LifecycleRelay({
      redis: conn,
      keys,
      nats: fixedNats(nats),
      logger,
      consumer,
      claimIdleMs,
      blockMs: 200,
    });
    relays.push(r);
    r.start();
    return r;
  };
  cleanups.push(async () => {
    for (const r of relays) await r.stop();
    for (const c of conns) c.disconnect();
    sub.unsubscribe();
    await deleteNamespaceKeys(redis, ns);
  });
  const groupReady = () =>
    vi.waitUntil(
      async () =>
        (await redis.exists(keys.lifecycleStream)) === 1 &&
        ((await redis.xinfo('GROUPS', keys.lifecycleStream)) as unknown[]).length > 0,
      { timeout: 20_000, interval: 20 },
    );
  const until = (cond: () => boolean, ms = 5000) =>
    vi.waitUntil(cond, { timeout: ms, interval: 20 }).catch(() => undefined);
  return { ns, keys, store, received, relay, groupReady, until };
}

describe('lifecycle relay to NATS', () => {
  it('publishes every transition exactly once across two replicas, on tenant/state subjects', async () => {
    const h = setup();
    h.relay('a');
    h.relay('b');
    await h.groupReady();
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const id = `${h.ns}-${i}`;
      ids.push(id);
      await h.store.create(
        parseJobSpec({ id, tenant: i % 2 ? 'odd' : 'even', image: 'x', steps: [{ command: 'true' }] }),
      );
      await h.store.transition(id, ['queued'], 'scheduled');
    }
    await h.until(() => h.received.length >= 20);
    // A relay publishes before it acknowledges: once the group has every entry delivered and none
    // pending, any second publish of an entry has already happened.
    await expect
      .poll(
        async () => {
          const [pending] = (await redis.xpending(h.keys.lifecycleStream, 'nats-relay')) as [number];
          const groups = (await redis.xinfo('GROUPS', h.keys.lifecycleStream)) as unknown[][];
          const group = groups.find((g) => g[g.indexOf('name') + 1] === 'nats-relay') ?? [];
          const lastDelivered = group[group.indexOf('last-delivered-id') + 1];
          const [[lastId] = []] = await redis.xrevrange(h.keys.lifecycleStream, '+', '-', 'COUNT', 1);
          return pending === 0 && lastDelivered === lastId;
        },
        { timeout: 10_000 },
      )
      .toBe(true);
    expect(h.received).toHaveLength(20);
    const msgIds = new Set(h.received.map((m) => m.headers?.get('Nats-Msg-Id')));
    expect(msgIds.size).toBe(20);
    const first = h.received.filter((m) => m.headers?.get('Sandstream-Job-Id') === ids[1]);
    expect(first.map((m) => m.subject)).toEqual([
      `sandstream.${h.ns}.lifecycle.odd.queued`,
      `sandstream.${h.ns}.lifecycle.odd.scheduled`,
    ]);
    expect(JSON.parse(new TextDecoder().decode(first[1]!.data))).toMatchObject({
      jobId: ids[1],
      from: 'queued',
      to: 'scheduled',
    });
  });

  it('takes over entries a dead replica read but never acknowledged', async () => {
    const h = setup();
    const first = h.relay('first');
    await h.groupReady();
    await first.stop();
    await h.store.create(
      parseJobSpec({ id: `${h.ns}-lost`, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }),
    );
    // A replica that read the entry and died before publishing it.
    const read = (await redis.call(
      'XREADGROUP',
      'GROUP',
      'nats-relay',
      'dead',
      'STREAMS',
      h.keys.lifecycleStream,
      '>',
    )) as unknown[];
    expect(read).toHaveLength(1);
    h.relay('survivor', 200);
    await h.until(() => h.received.length >= 1);
    expect(h.received.map((m) => m.subject)).toEqual([`sandstream.${h.ns}.lifecycle.acme.queued`]);
    const pending = (await redis.xpending(h.keys.lifecycleStream, 'nats-relay')) as [number, ...unknown[]];
    expect(pending[0]).toBe(0);
  });
});
