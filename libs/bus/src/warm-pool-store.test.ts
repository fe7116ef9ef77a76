import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeySpace } from './key-space.js';
import { type PoolMember, WarmPoolStore } from './warm-pool-store.js';

const redis = connectTestRedis();
const namespaces: string[] = [];

function fresh() {
  const ns = `t-${uniqueSuffix()}`;
  namespaces.push(ns);
  const keys = createKeySpace(ns);
  return { keys, store: new WarmPoolStore(redis, keys) };
}

function member(id: string, overrides: Partial<PoolMember> = {}): PoolMember {
  return {
    id,
    pool: 'node',
    specHash: 'h1',
    tenants: null,
    state: 'starting',
    createdAt: Date.now(),
    readyBy: Date.now() + 60_000,
    owner: 'test',
    ...overrides,
  };
}

/** Reserves and readies `count` members of pool `node`, version h1. */
async function fill(store: WarmPoolStore, count: number, overrides: Partial<PoolMember> = {}) {
  const members: PoolMember[] = [];
  for (let i = 0; i < count; i++) {
    const m = member(`m-${uniqueSuffix()}`, overrides);
    expect(await store.reserve(m, { max: 100, capacity: 1000 })).toBe('reserved');
    expect(await store.markReady(m)).toBe(true);
    members.push(m);
  }
  return members;
}

afterAll(async () => {
  for (const ns of namespaces) {
    const found = await redis.keys(`{${ns}:pools}:*`);
    if (found.length) await redis.unlink(...found);
  }
  redis.disconnect();
});

describe('warm pool store', () => {
  it('hands each member to exactly one of 200 concurrent claims against a pool of 50, from 8 connections', async () => {
    const { keys, store } = fresh();
    await fill(store, 50);
    const clients = Array.from({ length: 8 }, () => connectTestRedis());
    try {
      const stores = clients.map((c) => new WarmPoolStore(c, keys));
      const outcomes = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          (stores[i % stores.length] as WarmPoolStore).claim({
            pool: 'node',
            specHash: 'h1',
            jobId: `job-${i}`,
            tenant: 'acme',
          }),
        ),
      );
      const hits = outcomes.flatMap((o) => (o.kind === 'hit' ? [o.member] : []));
      expect(hits).toHaveLength(50);
      expect(new Set(hits.map((m) => m.id)).size).toBe(50);
      expect(outcomes.filter((o) => o.kind === 'empty')).toHaveLength(150);
      for (const hit of hits) {
        expect(hit.state).toBe('claimed');
        expect(await store.claimedBy(hit.claimedBy as string)).toBe(hit.id);
      }
      // Claimed members left the pool: a refill may replace them, the pool counts none of them.
      expect(await store.poolSize('node')).toBe(0);
    } finally {
      for (const c of clients) c.disconnect();
    }
  });

  it('never lets a pool pass its max nor all pools the capacity, however many replicas reserve at once', async () => {
    const { keys, store } = fresh();
    const clients = Array.from({ length: 5 }, () => connectTestRedis());
    try {
      const stores = clients.map((c) => new WarmPoolStore(c, keys));
      const tries = Array.from({ length: 60 }, (_, i) =>
        (stores[i % stores.length] as WarmPoolStore).reserve(member(`a-${i}`), { max: 8, capacity: 10 }),
      );
      const other = Array.from({ length: 60 }, (_, i) =>
        (stores[i % stores.length] as WarmPoolStore).reserve(member(`b-${i}`, { pool: 'py' }), {
          max: 8,
          capacity: 10,
        }),
      );
      const results = await Promise.all([...tries, ...other]);
      expect(results.filter((r) => r === 'reserved')).toHaveLength(10);
      expect(await store.poolSize('node')).toBeLessThanOrEqual(8);
      expect(await store.poolSize('py')).toBeLessThanOrEqual(8);
      expect(results).toContain('capacity');
    } finally {
      for (const c of clients) c.disconnect();
    }
  });

  it('counts members that never became ready against the max until they are removed', async () => {
    const { store } = fresh();
    const stuck = [member('s1'), member('s2')];
    for (const m of stuck) expect(await store.reserve(m, { max: 2, capacity: 10 })).toBe('reserved');
    // Failing members are not added on top: the pool is full until they go.
    expect(await store.reserve(member('s3'), { max: 2, capacity: 10 })).toBe('max');
    expect(await store.remove(stuck[0] as PoolMember, 'starting')).toMatchObject({ id: 's1' });
    expect(await store.reserve(member('s3'), { max: 2, capacity: 10 })).toBe('reserved');
    // A removed member's late readiness is refused (its creator then destroys it).
    expect(await store.markReady(stuck[0] as PoolMember)).toBe(false);
  });

  it('serves a reserved pool only to its tenants, and a job only once', async () => {
    const { store } = fresh();
    await fill(store, 2, { tenants: ['acme'] });
    expect(await store.claim({ pool: 'node', specHash: 'h1', jobId: 'j1', tenant: 'other' })).toEqual({
      kind: 'tenant',
    });
    const hit = await store.claim({ pool: 'node', specHash: 'h1', jobId: 'j1', tenant: 'acme' });
    expect(hit.kind).toBe('hit');
    // The same job again (a redelivered start) gets no second member.
    const again = await store.claim({ pool: 'node', specHash: 'h1', jobId: 'j1', tenant: 'acme' });
    expect(again).toEqual({ kind: 'claimed-before', memberId: hit.kind === 'hit' ? hit.member.id : '' });
    expect(await store.poolSize('node')).toBe(1);
  });

  it('claims only members of the spec version asked for, and skips members removed meanwhile', async () => {
    const { store } = fresh();
    const [old] = await fill(store, 1, { specHash: 'h0' });
    expect(await store.claim({ pool: 'node', specHash: 'h1', jobId: 'j1', tenant: 't' })).toEqual({
      kind: 'empty',
    });
    const [a, b] = await fill(store, 2);
    // A member retired after it was ready (a resize) must not be handed out.
    await store.remove(a as PoolMember, 'ready');
    const hit = await store.claim({ pool: 'node', specHash: 'h1', jobId: 'j2', tenant: 't' });
    expect(hit.kind === 'hit' && hit.member.id).toBe(b?.id);
    expect(await store.claim({ pool: 'node', specHash: 'h0', jobId: 'j3', tenant: 't' })).toMatchObject({
      kind: 'hit',
      member: { id: old?.id },
    });
  });
});
