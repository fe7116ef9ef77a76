import { Redis } from 'ioredis';
import { z } from 'zod';
import { SandboxStartError } from './backend.js';

/** The operator override, named in every refusal so the fix is one copy away. */
export const ALLOW_OPEN_REDIS_ENV = 'SANDSTREAM_ALLOW_OPEN_REDIS';

/**
 * SANDSTREAM_ALLOW_OPEN_REDIS, read by the Docker and Kubernetes backends alike: `1`/`true` on,
 * `0`/`false`/unset off; anything else is a typo worth refusing at start.
 */
export const allowOpenRedisVar = z.preprocess(
  (v) => (typeof v === 'string' && v.trim() === '' ? undefined : v),
  z
    .enum(['1', 'true', '0', 'false'], {
      error: (i) =>
        `SANDSTREAM_ALLOW_OPEN_REDIS must be 1, true, 0 or false (got ${JSON.stringify(i.input)})`,
    })
    .optional()
    .transform((v) => v === '1' || v === 'true'),
);

export type DefaultUserState = 'open' | 'closed' | 'unreachable';

/**
 * Connects to the Redis behind `redisUrl` as a sandbox would with no credentials at all and sends
 * PING: a Redis whose `default` user is on with no password answers PONG (every connection is
 * authenticated as it), one with it off or password-protected answers NOAUTH. This needs no
 * rights (ACL GETUSER would need an admin) and asks the very server the sandbox is given.
 */
export async function probeDefaultUser(redisUrl: string, timeoutMs = 2000): Promise<DefaultUserState> {
  const url = new URL(redisUrl);
  url.username = '';
  url.password = '';
  const probe = new Redis(url.toString(), {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
    enableReadyCheck: false,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
  } catch {
    probe.disconnect();
    return 'unreachable';
  }
  try {
    return (await probe.ping()) === 'PONG' ? 'open' : 'closed';
  } catch (err) {
    // NOAUTH (or WRONGPASS on some versions) means the server asks for credentials; anything
    // else (a timeout) is not proof of either state.
    return /NOAUTH|WRONGPASS|Authentication required/i.test((err as Error).message)
      ? 'closed'
      : 'unreachable';
  } finally {
    probe.disconnect();
  }
}

const CACHE_MS = 5000;

/**
 * Refuses sandbox creation when the Redis sandboxes reach lets anyone in as `default`: that user
 * has every right, so a step could read and write every job's keys, bypassing its own ACL user.
 * A result is kept a few seconds so a burst of creates costs one probe; an unreachable Redis is
 * not refused here (the agent could not reach it either, and the start deadline reports that).
 */
export class OpenRedisGuard {
  private readonly cache = new Map<string, { state: DefaultUserState; at: number }>();

  constructor(private readonly options: { allowOpenRedis?: boolean; backend: string }) {}

  async check(redisUrl: string): Promise<void> {
    if (this.options.allowOpenRedis) return;
    const key = redisUrl;
    const hit = this.cache.get(key);
    let state = hit && Date.now() - hit.at < CACHE_MS ? hit.state : undefined;
    if (!state) {
      state = await probeDefaultUser(redisUrl);
      this.cache.set(key, { state, at: Date.now() });
    }
    if (state !== 'open') return;
    const { host } = new URL(redisUrl);
    throw new SandboxStartError(
      'backend_error',
      `the Redis sandboxes reach (${host}) has an open "default" user: any step could connect without credentials and act on every job's keys. ` +
        'Close it (ACL SETUSER default off ~* &* +@all, or `user default off ~* &* +@all` in the ACL file: off, so no one logs in, with its permissions, which Redis before 8.8 needs to replay its append-only file) and give the services an admin user in REDIS_URL; ' +
        `for development only, set ${ALLOW_OPEN_REDIS_ENV}=1 on pod-lifecycle to create ${this.options.backend} sandboxes anyway`,
    );
  }
}
