import {
  createKeySpace,
  ExpiredLeases,
  JobStore,
  LeaseRenewal,
  parseJobSpec,
  SlotAdmission,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { deleteNamespaceKeys, testRedisUrl } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { LeaseKeeper } from './lease-keeper.js';

const url = testRedisUrl();
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
    let passes = 0;
    const keeper = new LeaseKeeper({
      leases,
      store,
      logger,
      intervalMs: 200,
      onProgress: () => {
        passes++;
      },
    });
    const unrenewedUntil = (await leases.holders()).find((h) => h.holder === done)?.expiresAt ?? 0;
    keeper.start();
    // Anchored to the lease itself, not a guessed sleep: a full lease length past the end of the
    // lease nobody renews (the live one, taken earlier, would have lapsed by then too), and then
    // one more keeper pass.
    await expect.poll(() => Date.now(), { timeout: 10_000 }).toBeGreaterThan(unrenewedUntil + 600);
    const seen = passes;
    await expect.poll(() => passes, { timeout: 10_000 }).toBeGreaterThan(seen);
    await keeper.stop();
    expect(await expired.reclaimExpired()).toEqual([done]);
    expect((await leases.holders()).map((h) => h.holder)).toEqual([live]);
    // The live job's slot is still its own: a third job gets only the lapsed one.
    expect((await admission.acquire(`${ns}-third`, 'acme')).granted).toBe(true);
    expect((await admission.acquire(`${ns}-fourth`, 'acme')).granted).toBe(false);
  });
});
