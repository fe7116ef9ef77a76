import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { ApiKeyStore } from './api-keys.js';
import { createKeySpace } from './key-space.js';

const redis = connectTestRedis();
const keys = createKeySpace(`t-${uniqueSuffix()}`);
const store = new ApiKeyStore({ redis, keys });

afterAll(async () => {
  await redis.unlink(keys.apiKeys);
  redis.disconnect();
});

describe('API keys', () => {
  it('stores only a hash: the key verifies, the stored record does not contain it', async () => {
    const { key, info } = await store.create({ tenant: 'acme' });
    expect(key).toMatch(/^sk_[a-f0-9]{16}_[A-Za-z0-9_-]{43}$/);
    expect(info).toMatchObject({ tenant: 'acme', admin: false });
    const stored = await redis.hget(keys.apiKeys, info.id);
    expect(stored).not.toContain(key.slice(20));
    expect(await store.verify(key)).toEqual(info);
  });

  it('refuses a changed, malformed or revoked key, and an invalid tenant', async () => {
    const { key, info } = await store.create({ tenant: 'globex', admin: true });
    const last = key.at(-1) === 'A' ? 'B' : 'A';
    expect(await store.verify(`${key.slice(0, -1)}${last}`)).toBeNull();
    expect(await store.verify('Bearer nonsense')).toBeNull();
    expect((await store.list()).find((k) => k.id === info.id)).toMatchObject({ admin: true });
    expect(await store.revoke(info.id)).toBe(true);
    expect(await store.revoke(info.id)).toBe(false);
    expect(await store.verify(key)).toBeNull();
    await expect(store.create({ tenant: 'Not A Tenant' })).rejects.toThrow(/tenant may contain only/);
  });

  it('registers a key made elsewhere once: it verifies as admin, a second register changes nothing', async () => {
    const key = `sk_${'ab'.repeat(8)}_${'x'.repeat(43)}`;
    expect(await store.register(key, { tenant: 'default', admin: true })).toBe(true);
    expect(await store.verify(key)).toMatchObject({ id: 'ab'.repeat(8), tenant: 'default', admin: true });
    expect(await store.register(key, { tenant: 'other' })).toBe(false);
    expect(await store.verify(key)).toMatchObject({ tenant: 'default', admin: true });
    await expect(store.register('sk_short', { tenant: 'default' })).rejects.toThrow(/must look like/);
  });
});
