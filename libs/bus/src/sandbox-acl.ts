import { createHash, randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';
import { homeDatabase } from './scan-keys.js';

/**
 * Exactly the commands the agent sends (agent/src, and the raw transfer connection of
 * libs/wire): heartbeat SET/DEL, step, control, claim and terminal-input BRPOP, results LPUSH (a
 * standalone agent's) or SET (a result key), events and notices XADD, XLEN of its events stream
 * (with the log archive on it keeps the stream below a high water mark), one PUBLISH on its own
 * ready channel when it starts, MULTI/EXEC around a terminal's output, LPUSH/EXPIRE/LLEN/BRPOP on
 * a transfer's list, QUIT on the way out and CLIENT SETNAME when it connects. Nothing else: no
 * SELECT (another database would take its pattern there, outside what the services watch and
 * clean; sandboxDatabaseRules), no GET, no PING. docs/wire.md lists them for operators.
 * Redis lets XLEN through `%W~` too (it reads no entry), so a sandbox can learn the length of the
 * shared notify stream, and nothing more of it.
 */
export const AGENT_COMMANDS = [
  'set',
  'del',
  'expire',
  'brpop',
  'lpush',
  'llen',
  'xadd',
  'xlen',
  'publish',
  // A terminal's output goes out as MULTI { XADD, EXPIRE } EXEC (agent/src/steps/terminal-channel.ts):
  // without these the MULTI is refused, its commands run one by one and EXEC fails, so every
  // flush was reported as dropped output although it arrived. They name no key: the queued
  // commands are still checked against the user's keys.
  'multi',
  'exec',
  'quit',
  // ioredis names every connection (CLIENT LIST tells a sandbox's connections apart by it).
  'client|setname',
] as const;

/**
 * SELECT of the services' own database and no other: nothing where it is 0 (the agent then never
 * selects), `+select|N` where the installation lives in database N (the agent's URL names it, so
 * ioredis and the transfer connection select it when they connect). Redis checks a first
 * argument given this way as it checks a key, so `SELECT 1` answers NOPERM all the same.
 */
export function sandboxDatabaseRules(database: number): string[] {
  return database === 0 ? [] : [`+select|${database}`];
}

export const SANDBOX_USER_PREFIX = 'sandstream-sbx-';

export interface SandboxCredentials {
  username: string;
  /** Secret: goes into the agent's REDIS_URL only, never into logs or Redis. */
  password: string;
  /**
   * SHA-256 of the password, as `ACL SETUSER … #<hash>` takes it: kept with the job record so
   * the user can be re-created after a Redis restart (ACL users are not in the AOF) without the
   * password ever being stored.
   */
  passwordHash: string;
}

/** The SHA-256 (hex) of a password, the form Redis keeps and `#<hash>` accepts. */
export function aclPasswordHash(password: string): string {
  return createHash('sha256').update(password).digest('hex');
}

/**
 * The ACL rules of one sandbox's user: its own keys, write-only XADD to its notify stream, its
 * own ready channel (PUBLISH only: SUBSCRIBE is not among its commands), nothing else.
 */
export function sandboxAclRules(
  keys: KeySpace,
  jobId: string,
  notifyStream: string,
  password: { password: string } | { hash: string },
  database = 0,
): string[] {
  return [
    'reset',
    'on',
    'password' in password ? `>${password.password}` : `#${password.hash}`,
    `~${keys.sandboxPrefix(jobId)}*`,
    `%W~${notifyStream}`,
    'resetchannels',
    `&${keys.sandbox(jobId).ready}`,
    '-@all',
    ...AGENT_COMMANDS.map((c) => `+${c}`),
    ...sandboxDatabaseRules(database),
  ];
}

/**
 * What an idle warm pool member sends while it waits for a claim (agent/src/await-claim.ts): BRPOP
 * its own claim key, SET and DEL its own heartbeat, PUBLISH once on its own ready channel. Nothing
 * of any job, no other database (sandboxDatabaseRules); the claim gives the sandbox a job's user
 * (same password, the job's rules) and this user is deleted.
 */
export const POOL_MEMBER_COMMANDS = ['brpop', 'set', 'del', 'publish', 'quit', 'client|setname'] as const;

export function poolMemberAclRules(
  keys: KeySpace,
  memberId: string,
  password: { password: string } | { hash: string },
  database = 0,
): string[] {
  const own = keys.sandbox(memberId);
  return [
    'reset',
    'on',
    'password' in password ? `>${password.password}` : `#${password.hash}`,
    `~${own.claim}`,
    `~${own.heartbeat}`,
    'resetchannels',
    `&${own.ready}`,
    '-@all',
    ...POOL_MEMBER_COMMANDS.map((c) => `+${c}`),
    ...sandboxDatabaseRules(database),
  ];
}

function nodesOf(redis: RedisClient): Redis[] {
  // ACLs are per node: on a Cluster every master and replica needs the user (replicas take over).
  return 'nodes' in redis && typeof (redis as Cluster).nodes === 'function' && (redis as Cluster).isCluster
    ? (redis as Cluster).nodes('all')
    : [redis as Redis];
}

/**
 * One Redis user per sandbox, so a compromised sandbox can read and write only its own job's
 * keys. Created before the sandbox starts, deleted when it is destroyed (and by the reaper
 * when a destroy was lost).
 */
export class SandboxAcl {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    private readonly userPrefix = SANDBOX_USER_PREFIX,
  ) {}

  /** The services' database: the one database a sandbox's agent may SELECT (sandboxDatabaseRules). */
  private get database(): number {
    return homeDatabase(this.redis);
  }

  /** True when the server accepts ACL commands (Redis 6+ without ACL renamed away). */
  async supported(): Promise<boolean> {
    try {
      await nodesOf(this.redis)[0]!.call('ACL', 'WHOAMI');
      return true;
    } catch {
      return false;
    }
  }

  username(jobId: string): string {
    return `${this.userPrefix}${jobId}`;
  }

  /** Creates (or resets, on a redelivery) the sandbox's user with a fresh password. */
  async create(jobId: string, notifyStream: string): Promise<SandboxCredentials> {
    const username = this.username(jobId);
    const password = randomBytes(24).toString('hex');
    const rules = sandboxAclRules(this.keys, jobId, notifyStream, { password }, this.database);
    await Promise.all(nodesOf(this.redis).map((node) => node.call('ACL', 'SETUSER', username, ...rules)));
    return { username, password, passwordHash: aclPasswordHash(password) };
  }

  /**
   * Re-creates a user that Redis lost (a restart: ACL users live outside the AOF) with the same
   * rules and the kept password hash, so the running agent's credentials work again.
   */
  async restore(jobId: string, notifyStream: string, passwordHash: string): Promise<void> {
    const rules = sandboxAclRules(this.keys, jobId, notifyStream, { hash: passwordHash }, this.database);
    await Promise.all(
      nodesOf(this.redis).map((node) => node.call('ACL', 'SETUSER', this.username(jobId), ...rules)),
    );
  }

  /** Creates the Redis user of an idle warm pool member (poolMemberAclRules), fresh password. */
  async createPoolMember(memberId: string): Promise<SandboxCredentials> {
    const username = this.username(memberId);
    const password = randomBytes(24).toString('hex');
    const rules = poolMemberAclRules(this.keys, memberId, { password }, this.database);
    await Promise.all(nodesOf(this.redis).map((node) => node.call('ACL', 'SETUSER', username, ...rules)));
    return { username, password, passwordHash: aclPasswordHash(password) };
  }

  /**
   * Re-creates an idle warm pool member's user that Redis lost (a restart), with the member's
   * rules and the password hash kept in its record (WarmPoolStore), so its agent, still waiting
   * for a claim, logs in again with the password it already holds.
   */
  async restorePoolMember(memberId: string, passwordHash: string): Promise<void> {
    const rules = poolMemberAclRules(this.keys, memberId, { hash: passwordHash }, this.database);
    await Promise.all(
      nodesOf(this.redis).map((node) => node.call('ACL', 'SETUSER', this.username(memberId), ...rules)),
    );
  }

  /**
   * The claimed job's user, with the member's password (its hash): the sandbox already holds that
   * password in its environment, so binding it to the job sends no secret through Redis.
   */
  async createForClaim(jobId: string, notifyStream: string, passwordHash: string): Promise<string> {
    await this.restore(jobId, notifyStream, passwordHash);
    return this.username(jobId);
  }

  /** True when the sandbox's user exists (on the first node; they are created on all at once). */
  async exists(jobId: string): Promise<boolean> {
    return (await nodesOf(this.redis)[0]!.call('ACL', 'GETUSER', this.username(jobId))) !== null;
  }

  /** Idempotent. Also disconnects the user's live connections (Redis does that on DELUSER). */
  async delete(jobId: string): Promise<void> {
    const username = this.username(jobId);
    await Promise.all(nodesOf(this.redis).map((node) => node.call('ACL', 'DELUSER', username)));
  }

  /**
   * Cuts a sandbox off Redis at once: its user turned off (no new connection authenticates) and
   * its live connections killed (a write in flight, pipelined or not, goes no further). The user
   * stays, off, so nothing that restores missing users brings it back; delete() removes it with
   * the sandbox.
   */
  async disable(jobId: string): Promise<void> {
    const username = this.username(jobId);
    await Promise.all(
      nodesOf(this.redis).map(async (node) => {
        await node.call('ACL', 'SETUSER', username, 'off');
        await node.call('CLIENT', 'KILL', 'USER', username);
      }),
    );
  }

  /** Job ids that have a sandbox user (the reaper removes those whose job is gone). */
  async listJobIds(): Promise<string[]> {
    const users = (await nodesOf(this.redis)[0]!.call('ACL', 'USERS')) as string[];
    return users.filter((u) => u.startsWith(this.userPrefix)).map((u) => u.slice(this.userPrefix.length));
  }
}

/** The agent's Redis URL with the sandbox user's credentials in it. */
export function urlWithCredentials(url: string, credentials: SandboxCredentials | undefined): string {
  if (!credentials) return url;
  const parsed = new URL(url);
  parsed.username = encodeURIComponent(credentials.username);
  parsed.password = encodeURIComponent(credentials.password);
  return parsed.toString();
}
