import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeySpace } from './key-space.js';
import { ExpiredLeases, LeaseRenewal, SlotAdmission } from './slot-leases.js';

const redis = connectTestRedis();
const namespaces: string[] = [];

function fresh(globalLimit: number, tenantLimit: number, leaseMs = 60_000, now?: () => number) {
  const ns = `t-${uniqueSuffix()}`;
  namespaces.push(ns);
  const keys = createKeySpace(ns);
  const clock = now ? { now } : {};
  return {
    keys,
    leases: new SlotAdmission({ redis, keys, globalLimit, tenantLimit, leaseMs, ...clock }),
    // pod-lifecycle's and the reaper's sides of the same sets.
    renewal: new LeaseRenewal({ redis, keys, leaseMs, ...clock }),
    expired: new ExpiredLeases({ redis, keys, ...clock }),
  };
}

afterAll(async () => {
  for (const ns of namespaces) {
    const found = await redis.keys(`{${ns}:leases}:*`);
    if (found.length) await redis.unlink(...found);
  }
  redis.disconnect();
});

describe('slot leases', () => {
  it('never over-admits under concurrency: 50 racing acquires for 5 slots, from 5 connections', async () => {
    const { leases, keys } = fresh(5, 100);
    const clients = Array.from({ length: 5 }, () => connectTestRedis());
    try {
      const racers = clients.map(
        (client) =>
          new SlotAdmission({ redis: client, keys, globalLimit: 5, tenantLimit: 100, leaseMs: 60_000 }),
      );
      const results = await Promise.all(
        Array.from({ length: 50 }, (_, i) => racers[i % 5]!.acquire(`job-${i}`, 'acme')),
      );
      expect(results.filter((r) => r.granted)).toHaveLength(5);
      expect(await leases.inUse()).toBe(5);
    } finally {
      for (const c of clients) c.disconnect();
    }
  });

  it('reserves a slot only for a job still waiting, and takes it out of the waiting set', async () => {
    const { leases, keys } = fresh(2, 1);
    await redis.zadd(keys.capacityWaiting, 1, 'w1', 2, 'w2', 3, 'w3');
    expect(await leases.reserve('w1', 'alpha')).toBe('reserved');
    expect(await leases.reserve('w1', 'alpha')).toBe('gone'); // a second waker: nothing twice
    expect(await leases.reserve('w2', 'alpha')).toBe('tenant');
    expect(await leases.reserve('w3', 'beta')).toBe('reserved');
    expect(await leases.reserve('w2', 'gamma')).toBe('global');
    expect(await leases.reserve('never-waited', 'delta')).toBe('gone');
    expect(await redis.zrange(keys.capacityWaiting, 0, -1)).toEqual(['w2']);
    // The woken job's own admission finds its slot held.
    expect(await leases.holds('w1')).toBe(true);
    expect(await leases.acquire('w1', 'alpha')).toEqual({ granted: true });
    expect(await leases.inUse()).toBe(2);
  });

  it('enforces the tenant limit separately from the global one', async () => {
    const { leases } = fresh(10, 2);
    expect(await leases.acquire('a1', 'a')).toEqual({ granted: true });
    expect(await leases.acquire('a2', 'a')).toEqual({ granted: true });
    expect(await leases.acquire('a3', 'a')).toEqual({ granted: false, blockedBy: 'tenant' });
    expect(await leases.acquire('b1', 'b')).toEqual({ granted: true });
    // Acquiring again is idempotent (a redelivered job keeps its slot).
    expect(await leases.acquire('a1', 'a')).toEqual({ granted: true });
    expect(await leases.inUse('a')).toBe(2);
  });

  it('reclaims the slot of a holder that stopped renewing, and release wakes a waiter', async () => {
    let clock = 1_000_000;
    const { leases, renewal, expired, keys } = fresh(1, 1, 5_000, () => clock);
    expect((await leases.acquire('dead', 't')).granted).toBe(true);
    expect(await leases.acquire('next', 't')).toEqual({ granted: false, blockedBy: 'global' });
    clock += 4_000;
    expect(await renewal.renew('dead', 't')).toBe(true); // still alive: extends to clock+5000
    clock += 4_000;
    expect((await leases.acquire('next', 't')).granted).toBe(false);
    clock += 6_000; // now past the renewed expiry: holder is dead
    expect(await expired.reclaimExpired()).toEqual(['dead']);
    expect(await redis.lrange(keys.capacityFreed, 0, -1)).toEqual(['dead']);
    expect(await renewal.renew('dead', 't')).toBe(false); // a late renewal cannot revive it
    expect((await leases.acquire('next', 't')).granted).toBe(true);
    expect(await leases.release('next', 't')).toBe(true);
    expect(await leases.release('next', 't')).toBe(false);
    expect(await redis.llen(keys.capacityFreed)).toBe(2);
  });
});

describe('slot leases per tenant', () => {
  it('reports slots in use by tenant', async () => {
    const { leases } = fresh(10, 10);
    await leases.acquire('x1', 'alpha');
    await leases.acquire('x2', 'alpha');
    await leases.acquire('y1', 'beta');
    const byTenant = await leases.inUseByTenant();
    expect(byTenant.sort((a, b) => a.tenant.localeCompare(b.tenant))).toEqual([
      { tenant: 'alpha', inUse: 2 },
      { tenant: 'beta', inUse: 1 },
    ]);
  });
});
