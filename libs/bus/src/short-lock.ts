import { busLua } from './bus-lua.js';
import type { RedisClient } from './redis-connection.js';

const RENEW = busLua.load('lock-renew');
const RELEASE = busLua.load('lock-release');

/**
 * A short lock: one key set with SET PX NX, so that one of several replicas does a piece of
 * work (a check round, a planning pass, a job's archive) and the lock lapses by itself when its
 * holder dies. Keys come from `KeySpace.lock(…)`.
 *
 * Taken with a unique `owner` (a replica's name), it can be renewed and released safely: both
 * act only while the owner still holds it. A lock taken with the default owner is meant to be
 * left to lapse: releasing it could free someone else's.
 */
export async function tryLock(redis: RedisClient, key: string, ttlMs: number, owner = '1'): Promise<boolean> {
  return (await redis.set(key, owner, 'PX', Math.ceil(ttlMs), 'NX')) === 'OK';
}

/** Extends the lock to `ttlMs` from now; false when `owner` no longer holds it. */
export async function renewLock(
  redis: RedisClient,
  key: string,
  ttlMs: number,
  owner: string,
): Promise<boolean> {
  return (await RENEW.run<number>(redis, [key], [owner, Math.ceil(ttlMs)])) === 1;
}

/** Deletes the lock if `owner` still holds it; false when it lapsed (and maybe went to another). */
export async function releaseLock(redis: RedisClient, key: string, owner: string): Promise<boolean> {
  return (await RELEASE.run<number>(redis, [key], [owner])) === 1;
}
