import { apiKeyRevocations, type KeySpace, type RedisClient } from '@sandstream/bus';
import type { Principals } from './principal.js';

/**
 * Keeps this replica's cache of verified API keys (Principals) honest: a key revoked anywhere
 * (`sandstream apikey revoke`, ApiKeyStore.revoke) is published, and dropped here as the message
 * arrives, instead of being honoured until its cache entry ages out. A subscriber that (re)connects
 * drops the whole cache, since a revocation published while it was away is lost.
 */
export async function followKeyRevocations(
  redis: RedisClient,
  keys: KeySpace,
  principals: Principals,
): Promise<{ close(): void }> {
  const channel = apiKeyRevocations(keys);
  const subscriber = redis.duplicate();
  subscriber.on('message', (from: string, keyId: string) => {
    if (from === channel) principals.forget(keyId);
  });
  // Errors are the connection's (it reconnects and resubscribes by itself): not the process's end.
  subscriber.on('error', () => {});
  subscriber.on('ready', () => principals.forgetAll());
  await subscriber.subscribe(channel);
  return { close: () => subscriber.disconnect() };
}
