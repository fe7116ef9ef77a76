import {
  createKeySpace,
  ExpiredLeases,
  JobStore,
  LeaseRenewal,
  parseJobSpec,
  SlotAdmission,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseKeeper } from './lease-keeper.js';

const url = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const redis = new Redis(url, { maxRetriesPerRequest: null });
const ns = `t-keeper-${Math.random().toString(36).slice(2, 10)}`;
const keys = createKeySpace(ns);
const store = new JobStore({ redis, keys });
const logger = silentLogger('keeper-test');

afterAll(async () => {
  for (const name of ['live', 'done']) await store.delete(`${ns}-${name}`, 'acme');
  await deleteNamespaceKeys(redis, ns);
  redis.disconnect();
});

describe('lease keeper', () => {
  it('keeps the slot of a live job past its lease length and lets a finished job’s slot lapse', async () => {
    // The scheduler admits, the keeper renews, the reaper reclaims: three sides of the same sets.
    const admission = new SlotAdmission({ redis, keys, globalLimit: 2, tenantLimit: 2, leaseMs: 600 });
    const leases = new LeaseRenewal({ redis, keys, leaseMs: 600 });
    const expired = new ExpiredLeases({ redis, keys });
    const live = `${ns}-live`;
    const done = `${ns}-done`;
    for (const id of [live, done]) {
      await store.create(parseJobSpec({ id, tenant: 'acme', image: 'x', steps: [{ command: 'true' }] }));
      expect((await admission.acquire(id, 'acme')).granted).toBe(true);
    }
    await store.transition(done, ['queued'], 'cancelled');
    const keeper = new LeaseKeeper({ leases, store, logger, intervalMs: 200 });
    keeper.start();
    await new Promise((r) => setTimeout(r, 1500)); // 2.5 lease lengths
    await keeper.stop();
    expect(await expired.reclaimExpired()).toEqual([done]);
    expect((await leases.holders()).map((h) => h.holder)).toEqual([live]);
    // The live job's slot is still its own: a third job gets only the lapsed one.
    expect((await admission.acquire(`${ns}-third`, 'acme')).granted).toBe(true);
    expect((await admission.acquire(`${ns}-fourth`, 'acme')).granted).toBe(false);
  });
});
