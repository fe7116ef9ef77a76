import { z } from 'zod';
import { busLua } from './bus-lua.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

const RESERVE = busLua.load('pool-reserve');
const UPDATE = busLua.load('pool-member-update');
const READY = busLua.load('pool-member-ready');
const CLAIM = busLua.load('pool-claim');
const REMOVE = busLua.load('pool-member-remove');

export const PoolMemberStateSchema = z.enum(['starting', 'ready', 'claimed']);
export type PoolMemberState = z.infer<typeof PoolMemberStateSchema>;

/**
 * One warm pool member as kept in Redis (`pools.members`). `specHash` names the template version
 * it was built from (spec and tenants): a claim takes only members of the version in force, and
 * members of an older one are replaced. Lua reads and rewrites these records with cjson, so every
 * field is a plain JSON value and absent ones are left out (never `undefined`).
 */
export const PoolMemberSchema = z.object({
  id: z.string().min(1),
  pool: z.string().min(1),
  specHash: z.string().min(1),
  /** Tenants the pool is reserved for; null: any tenant. */
  tenants: z.array(z.string()).nullable(),
  state: PoolMemberStateSchema,
  createdAt: z.number(),
  /** A member still starting at this time (ms) is destroyed and replaced. */
  readyBy: z.number(),
  /** The pod-lifecycle replica that started it (for logs). */
  owner: z.string(),
  /** Where the sandbox lives, once the backend made it. */
  ref: z.object({ backend: z.enum(['inprocess', 'docker', 'kubernetes']), id: z.string() }).optional(),
  /** SHA-256 of the member's Redis password; the claimed job's user gets the same one. */
  passwordHash: z.string().optional(),
  readyAt: z.number().optional(),
  claimedBy: z.string().optional(),
  claimedAt: z.number().optional(),
  tenant: z.string().optional(),
});
export type PoolMember = z.infer<typeof PoolMemberSchema>;

export type ReserveOutcome = 'reserved' | 'max' | 'capacity';

export type ClaimOutcome =
  | { kind: 'hit'; member: PoolMember }
  | { kind: 'empty' }
  | { kind: 'tenant' }
  | { kind: 'claimed-before'; memberId: string };

function parseMember(raw: string): PoolMember | null {
  try {
    const parsed = PoolMemberSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/**
 * The Redis side of warm pools: every change of a member's state is one Lua script over keys
 * that share the `{<ns>:pools}` tag, so many pod-lifecycle replicas can refill, claim and retire
 * at once without a pool passing its max, the pools passing the global capacity, or a member being
 * claimed twice.
 */
export class WarmPoolStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
  ) {}

  /** Takes a place for a new `starting` member within the pool's max and the global capacity. */
  async reserve(member: PoolMember, limits: { max: number; capacity: number }): Promise<ReserveOutcome> {
    const k = this.keys.pools;
    const reply = await RESERVE.run<number>(
      this.redis,
      [k.members, k.pool(member.pool), k.unclaimed],
      [member.id, limits.max, limits.capacity, JSON.stringify(PoolMemberSchema.parse(member))],
    );
    return reply === 1 ? 'reserved' : reply === 0 ? 'max' : 'capacity';
  }

  /** Rewrites a member while it is still in `expected` state; false when it is gone or moved on. */
  async update(member: PoolMember, expected: PoolMemberState): Promise<boolean> {
    const reply = await UPDATE.run<number>(
      this.redis,
      [this.keys.pools.members],
      [member.id, expected, JSON.stringify(PoolMemberSchema.parse(member))],
    );
    return reply === 1;
  }

  /** starting -> ready (claimable); false when the member was removed meanwhile. */
  async markReady(member: PoolMember, now = Date.now()): Promise<boolean> {
    const k = this.keys.pools;
    const reply = await READY.run<number>(
      this.redis,
      [k.members, k.ready(member.pool, member.specHash)],
      [member.id, now],
    );
    return reply === 1;
  }

  /** Claims a ready member of `pool` built from `specHash` for `jobId` of `tenant`, atomically. */
  async claim(params: {
    pool: string;
    specHash: string;
    jobId: string;
    tenant: string;
    now?: number;
  }): Promise<ClaimOutcome> {
    const k = this.keys.pools;
    const reply = await CLAIM.run<string[]>(
      this.redis,
      [k.members, k.ready(params.pool, params.specHash), k.pool(params.pool), k.unclaimed, k.claims],
      [params.jobId, params.tenant, params.now ?? Date.now()],
    );
    const [kind, value] = reply;
    if (kind === 'hit') {
      const member = parseMember(value as string);
      if (!member) throw new Error(`claimed member of pool ${params.pool} has an unreadable record`);
      return { kind: 'hit', member };
    }
    if (kind === 'claimed-before') return { kind: 'claimed-before', memberId: value as string };
    if (kind === 'tenant') return { kind: 'tenant' };
    return { kind: 'empty' };
  }

  /** Forgets a member (only in `expected` state when given); returns it, or null when it was not. */
  async remove(member: PoolMember, expected?: PoolMemberState): Promise<PoolMember | null> {
    const k = this.keys.pools;
    const raw = await REMOVE.run<string | null>(
      this.redis,
      [k.members, k.pool(member.pool), k.unclaimed, k.ready(member.pool, member.specHash), k.claims],
      [member.id, expected ?? ''],
    );
    return raw ? parseMember(raw) : null;
  }

  async get(memberId: string): Promise<PoolMember | null> {
    const raw = await this.redis.hget(this.keys.pools.members, memberId);
    return raw === null ? null : parseMember(raw);
  }

  /**
   * Per id, whether a member record is kept under it (parsed or not): one HMGET for a whole pass
   * of the reaper, which before asked with an HGET per sandbox and per Redis user, every pass.
   */
  async areMembers(ids: readonly string[]): Promise<boolean[]> {
    if (ids.length === 0) return [];
    const raws = await this.redis.hmget(this.keys.pools.members, ...ids);
    return raws.map((raw) => raw !== null);
  }

  /** Every member, claimed ones included (bounded by the global capacity plus running warm jobs). */
  async all(): Promise<PoolMember[]> {
    const hash = await this.redis.hgetall(this.keys.pools.members);
    const out: PoolMember[] = [];
    for (const raw of Object.values(hash)) {
      const member = parseMember(raw);
      if (member) out.push(member);
    }
    return out;
  }

  /** The member a job claimed, if any. */
  async claimedBy(jobId: string): Promise<string | null> {
    return this.redis.hget(this.keys.pools.claims, jobId);
  }

  /** Unclaimed members of one pool (starting and ready). */
  async poolSize(pool: string): Promise<number> {
    return this.redis.scard(this.keys.pools.pool(pool));
  }
}
