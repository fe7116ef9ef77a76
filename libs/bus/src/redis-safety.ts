import { Redis } from 'ioredis';
import type { RedisClient } from './redis-connection.js';

/**
 * What a service should tell its operator about the Redis it was pointed at: Redis is the only
 * state, so an instance that anyone can use as `default`, or that keeps nothing on disk, puts
 * every job at risk. Read once at start; nothing here changes Redis.
 */
export interface RedisSafety {
  /** A client with no credentials at all is let in (the `default` user is on with nopass). */
  openDefaultUser: boolean | 'unknown';
  /** `aof`, `rdb` (save points only), `none`, or `unknown` when CONFIG and INFO are refused. */
  persistence: 'aof' | 'rdb' | 'none' | 'unknown';
}

function nodeAddress(client: RedisClient): { host: string; port: number; tls: boolean } | null {
  const options = client instanceof Redis ? client.options : client.nodes('master')[0]?.options;
  if (!options?.port) return null;
  return { host: options.host ?? '127.0.0.1', port: options.port, tls: options.tls !== undefined };
}

/** One connection with no username and no password: its PING answers PONG only for an open default user. */
async function probeDefaultUser(client: RedisClient): Promise<boolean | 'unknown'> {
  const address = nodeAddress(client);
  if (!address) return 'unknown';
  const anonymous = new Redis({
    host: address.host,
    port: address.port,
    ...(address.tls ? { tls: {} } : {}),
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: 5000,
    enableReadyCheck: false,
  });
  anonymous.on('error', () => {}); // the answer is the PING's, not the connection's
  try {
    await anonymous.connect();
    return (await anonymous.ping()) === 'PONG';
  } catch (err) {
    return /NOAUTH|WRONGPASS|NOPERM/.test((err as Error).message) ? false : 'unknown';
  } finally {
    anonymous.disconnect();
  }
}

function configValue(reply: unknown): string | undefined {
  return Array.isArray(reply) && typeof reply[1] === 'string' ? reply[1] : undefined;
}

async function probePersistence(client: RedisClient): Promise<RedisSafety['persistence']> {
  const node = client instanceof Redis ? client : client.nodes('master')[0];
  if (!node) return 'unknown';
  try {
    const appendonly = configValue(await node.config('GET', 'appendonly'));
    const save = configValue(await node.config('GET', 'save'));
    if (appendonly === 'yes') return 'aof';
    return save !== undefined && save.trim() !== '' ? 'rdb' : 'none';
  } catch {
    // Managed Redis often refuses CONFIG; INFO still says whether the AOF is on.
    try {
      const info = await node.info('persistence');
      return /aof_enabled:1/.test(info) ? 'aof' : 'unknown';
    } catch {
      return 'unknown';
    }
  }
}

export async function inspectRedisSafety(client: RedisClient): Promise<RedisSafety> {
  const [openDefaultUser, persistence] = await Promise.all([
    probeDefaultUser(client),
    probePersistence(client),
  ]);
  return { openDefaultUser, persistence };
}

/** The operator-facing warnings for a report: empty when there is nothing to say. */
export function redisSafetyWarnings(safety: RedisSafety): string[] {
  const warnings: string[] = [];
  if (safety.openDefaultUser === true) {
    warnings.push(
      'Redis lets in any client as the `default` user with no password: anything that can reach it has full rights over every job (give `default` a password or turn it off: ACL SETUSER default off)',
    );
  }
  if (safety.persistence === 'none') {
    warnings.push(
      'Redis keeps nothing on disk (appendonly no, no save points): a Redis restart loses every job (set appendonly yes and appendfsync everysec)',
    );
  }
  return warnings;
}

/**
 * Every service calls this once at start: it logs each warning and never throws or delays the
 * start (a Redis that is down now is reported by the readiness check, not here).
 */
export function warnAboutRedis(client: RedisClient, warn: (message: string) => void): void {
  inspectRedisSafety(client).then(
    (safety) => {
      for (const message of redisSafetyWarnings(safety)) warn(message);
    },
    () => {},
  );
}
