import { Redis } from 'ioredis';
import type { RedisClient } from './redis-connection.js';

/**
 * What a service should tell its operator about the Redis it was pointed at: Redis is the only
 * state, so an instance that anyone can use as `default`, that keeps nothing on disk, or that
 * drops transactions when it replays its append-only file, puts every job at risk. Read once at
 * start; nothing here changes Redis.
 */
export interface RedisSafety {
  /** A client with no credentials at all is let in (the `default` user is on with nopass). */
  openDefaultUser: boolean | 'unknown';
  /** `aof`, `rdb` (save points only), `none`, or `unknown` when CONFIG and INFO are refused. */
  persistence: 'aof' | 'rdb' | 'none' | 'unknown';
  /** From INFO server: `redis` or `valkey` and its version; `unknown` when INFO is refused. */
  server: { name: string; version: string } | 'unknown';
  /**
   * Whether the `default` user may run every command on every key (`all`), whether it is on or
   * off; `unknown` when ACL GETUSER and ACL LIST are both refused (managed Redis).
   */
  defaultUserPermissions: 'all' | 'restricted' | 'unknown';
}

/** The override of the refusal below, for an operator who knows their Redis is not affected. */
export const ALLOW_UNSAFE_REDIS_ACL_ENV = 'SANDSTREAM_ALLOW_UNSAFE_REDIS_ACL';

/**
 * Redis before 8.8, and every Valkey known here, replay each MULTI/EXEC of the append-only file
 * as the `default` user and re-check its ACL at EXEC: a `default` without permissions makes them
 * refuse (-NOPERM) and drop the whole transaction (redis/redis#14541, fixed by #14545, first in
 * the 8.8 line; Valkey #3983). Script effects are written as MULTI/EXEC, so that drops every job
 * record on restart. Only versions known to carry the fix pass: a later 8.4/8.6 patch may carry
 * it too, but not knowing is treated as affected.
 */
export function replayDropsTransactions(server: RedisSafety['server']): boolean | 'unknown' {
  if (server === 'unknown') return 'unknown';
  if (server.name !== 'redis') return true;
  const [major = 0, minor = 0] = server.version.split('.').map((part) => Number.parseInt(part, 10));
  if (!Number.isFinite(major) || !Number.isFinite(minor)) return true;
  return major < 8 || (major === 8 && minor < 8);
}

/** What a service must do about the AOF replay defect: start, start with a warning, or refuse. */
export type AofReplayVerdict = 'safe' | 'unsafe' | 'unknown';

export function aofReplayVerdict(safety: RedisSafety): AofReplayVerdict {
  const drops = replayDropsTransactions(safety.server);
  // Any one condition known to be absent makes the data safe.
  if (safety.persistence === 'none' || safety.persistence === 'rdb') return 'safe';
  if (drops === false || safety.defaultUserPermissions === 'all') return 'safe';
  if (safety.persistence === 'aof' && drops === true && safety.defaultUserPermissions === 'restricted')
    return 'unsafe';
  return 'unknown';
}

const ACL_FIX =
  'keep `default` off but give it every permission: `user default off ~* &* +@all` in the ACL file or the --user arguments, or ACL SETUSER default off ~* &* +@all (nobody can log in as an `off` user)';

function serverLabel(server: RedisSafety['server']): string {
  return server === 'unknown' ? 'this Redis' : `${server.name} ${server.version}`;
}

/** Why a service refuses this Redis (the fix and the override in the message), or null. */
export function aofReplayRefusal(safety: RedisSafety): string | null {
  if (aofReplayVerdict(safety) !== 'unsafe') return null;
  return `${serverLabel(safety.server)} keeps an append-only file and its \`default\` user has no permissions: it replays each MULTI/EXEC of the file (every Lua script's effects) as \`default\`, is refused (NOPERM) and drops it, so a restart loses every job and sandbox record (redis/redis#14541, fixed from Redis 8.8). Fix: ${ACL_FIX}. To start anyway: ${ALLOW_UNSAFE_REDIS_ACL_ENV}=1`;
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
  const node = masterNode(client);
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

function masterNode(client: RedisClient): Redis | undefined {
  return client instanceof Redis ? client : client.nodes('master')[0];
}

async function probeServer(client: RedisClient): Promise<RedisSafety['server']> {
  const node = masterNode(client);
  if (!node) return 'unknown';
  try {
    const info = await node.info('server');
    const field = (name: string) => new RegExp(`^${name}:(.+)$`, 'm').exec(info)?.[1]?.trim();
    // Valkey answers redis_version 7.2.4 for compatibility; its own fields say what it is.
    const valkey = field('valkey_version');
    if (valkey !== undefined || field('server_name') === 'valkey') {
      return { name: 'valkey', version: valkey ?? field('redis_version') ?? '?' };
    }
    const version = field('redis_version');
    return version ? { name: 'redis', version } : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** `+@all` with nothing taken away, and every key: what a replayed EXEC needs of `default`. */
function hasAllPermissions(commands: string, keys: string[], flags: string[]): boolean {
  const rules = commands.split(/\s+/).filter(Boolean);
  const allCommands =
    flags.includes('allcommands') || (rules[0] === '+@all' && rules.every((r) => r.startsWith('+')));
  const allKeys = flags.includes('allkeys') || keys.some((k) => k === '~*' || k === '%RW~*' || k === '*');
  return allCommands && allKeys;
}

function parseGetUser(reply: unknown): RedisSafety['defaultUserPermissions'] {
  if (!Array.isArray(reply)) return 'unknown';
  const field = (name: string): unknown => reply[reply.indexOf(name) + 1];
  const list = (value: unknown): string[] =>
    Array.isArray(value)
      ? value.map(String)
      : typeof value === 'string'
        ? value.split(/\s+/).filter(Boolean)
        : [];
  const commands = field('commands');
  if (typeof commands !== 'string') return 'unknown';
  return hasAllPermissions(commands, list(field('keys')), list(field('flags'))) ? 'all' : 'restricted';
}

function parseAclList(lines: unknown): RedisSafety['defaultUserPermissions'] {
  if (!Array.isArray(lines)) return 'unknown';
  const line = lines.map(String).find((l) => l.startsWith('user default '));
  if (!line) return 'unknown';
  const tokens = line.split(/\s+/).slice(2);
  const commands = tokens.filter((t) => /^[+-]/.test(t)).join(' ');
  const keys = tokens.filter((t) => t.includes('~'));
  return hasAllPermissions(commands, keys, tokens) ? 'all' : 'restricted';
}

async function probeDefaultUserPermissions(
  client: RedisClient,
): Promise<RedisSafety['defaultUserPermissions']> {
  const node = masterNode(client);
  if (!node) return 'unknown';
  try {
    return parseGetUser(await node.call('ACL', 'GETUSER', 'default'));
  } catch {
    // A managed Redis may allow ACL LIST but not GETUSER, or neither (then: unknown, a warning).
    try {
      return parseAclList(await node.call('ACL', 'LIST'));
    } catch {
      return 'unknown';
    }
  }
}

export async function inspectRedisSafety(client: RedisClient): Promise<RedisSafety> {
  const [openDefaultUser, persistence, server, defaultUserPermissions] = await Promise.all([
    probeDefaultUser(client),
    probePersistence(client),
    probeServer(client),
    probeDefaultUserPermissions(client),
  ]);
  return { openDefaultUser, persistence, server, defaultUserPermissions };
}

/** The operator-facing warnings for a report: empty when there is nothing to say. */
export function redisSafetyWarnings(safety: RedisSafety): string[] {
  const warnings: string[] = [];
  if (safety.openDefaultUser === true) {
    warnings.push(
      'Redis lets in any client as the `default` user with no password: anything that can reach it has full rights over every job (give `default` a password or turn it off, keeping its permissions: ACL SETUSER default off ~* &* +@all)',
    );
  }
  if (safety.persistence === 'none') {
    warnings.push(
      'Redis keeps nothing on disk (appendonly no, no save points): a Redis restart loses every job (set appendonly yes and appendfsync everysec)',
    );
  }
  if (aofReplayVerdict(safety) === 'unknown') {
    const unknown = [
      safety.persistence === 'unknown' ? 'whether the append-only file is on (CONFIG and INFO refused)' : '',
      safety.server === 'unknown' ? 'its version (INFO refused)' : '',
      safety.defaultUserPermissions === 'unknown'
        ? "the `default` user's permissions (ACL GETUSER and ACL LIST refused)"
        : '',
    ].filter(Boolean);
    warnings.push(
      `could not tell whether ${serverLabel(safety.server)} drops transactions when it replays its append-only file: unknown ${unknown.join(', ')}. Redis before 8.8 with AOF drops every MULTI/EXEC (every job record) on restart when its \`default\` user has no permissions (redis/redis#14541): if yours is such a Redis, ${ACL_FIX}`,
    );
  }
  return warnings;
}

export interface RedisStartCheck {
  /** Non-null: the service must not start; the message says why and how to fix it. */
  refusal: string | null;
  warnings: string[];
}

/**
 * The one decision every service makes about its Redis before it takes work: a Redis that would
 * lose every job on its next restart is refused unless the operator overrides it (then the
 * refusal becomes a warning); the rest are warnings.
 */
export async function checkRedisAtStart(
  client: RedisClient,
  options: { allowUnsafeAcl: boolean },
): Promise<RedisStartCheck> {
  const safety = await inspectRedisSafety(client);
  const warnings = redisSafetyWarnings(safety);
  const refusal = aofReplayRefusal(safety);
  if (refusal && options.allowUnsafeAcl) {
    return { refusal: null, warnings: [`${refusal} (set: starting anyway)`, ...warnings] };
  }
  return { refusal, warnings };
}
