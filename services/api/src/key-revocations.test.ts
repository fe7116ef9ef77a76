import { ApiKeyStore, createKeySpace } from '@sandstream/bus';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { followKeyRevocations } from './key-revocations.js';
import { Principals } from './principal.js';

const own = usePrivateRedis();
const server = () => own.server;
const ownRedis = () => own.redis;

describe('followKeyRevocations', () => {
  it('drops a revoked key from the cache as the revocation arrives; other keys stay cached', async () => {
    const keys = createKeySpace('revoke');
    const redis = ownRedis();
    // A cache that would outlive the test: only the revocation can end the revoked key.
    const principals = new Principals({
      store: new ApiKeyStore({ redis, keys }),
      redis,
      keys,
      anonymous: 'off',
      keyCacheMs: 600_000,
    });
    const revocations = await followKeyRevocations(redis, keys, principals);
    // The CLI revokes over its own connection, as another process would.
    const cli = new Redis(server().url);
    try {
      const cliStore = new ApiKeyStore({ redis: cli, keys });
      const revoked = await cliStore.create({ tenant: 'acme' });
      const kept = await cliStore.create({ tenant: 'acme' });
      const as = (key: string) =>
        principals.resolve({ authorization: `Bearer ${key}`, ticket: undefined, remoteAddress: '10.0.0.1' });
      expect(await as(revoked.key)).toMatchObject({ tenant: 'acme', keyId: revoked.info.id });
      expect(await as(kept.key)).toMatchObject({ keyId: kept.info.id });

      expect(await cliStore.revoke(revoked.info.id)).toBe(true);
      await expect
        .poll(
          () =>
            as(revoked.key).then(
              () => 'accepted',
              (err: Error) => err.message,
            ),
          { timeout: 10_000 },
        )
        .toBe('the API key is unknown or revoked');
      // Still answered from the cache: its record removed behind the cache's back does not end it.
      await cli.hdel(keys.apiKeys, kept.info.id);
      expect(await as(kept.key)).toMatchObject({ keyId: kept.info.id });
    } finally {
      cli.disconnect();
      revocations.close();
    }
  });
});
