import { busLua } from './bus-lua.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';
import { escapeGlob, scanKeys } from './scan-keys.js';

const ACQUIRE = busLua.load('lease-acquire');
const RENEW = busLua.load('lease-renew');
const RELEASE = busLua.load('lease-release');
const RECLAIM = busLua.load('lease-reclaim');
const RESERVE = busLua.load('lease-reserve');

export type AcquireResult = { granted: true } | { granted: false; blockedBy: 'global' | 'tenant' };

/** What reserving a slot for a waiting job did: `gone` when it no longer waits (nothing taken). */
export type ReserveResult = 'reserved' | 'global' | 'tenant' | 'gone';

export interface LeaseSetsOptions {
  redis: RedisClient;
  keys: KeySpace;
  now?: () => number;
}

export interface SlotAdmissionOptions extends LeaseSetsOptions {
  /** Sandboxes running at once across all tenants. */
  globalLimit: number;
  /** Sandboxes one tenant may run at once. */
  tenantLimit: number | ((tenant: string) => number);
  /** How long a lease lasts without renewal; a crashed holder frees its slot after this. */
  leaseMs: number;
}

export interface LeaseRenewalOptions extends LeaseSetsOptions {
  /** How far each renewal pushes a lease's expiry. */
  leaseMs: number;
}

/**
 * Admission slots as leases: a holder (a job id) sits in the global set and in its tenant's set,
 * scored by when its lease expires. The concept has five actors, each with its own class here so
 * that none holds what it does not do: the scheduler admits (SlotAdmission: acquire, release),
 * pod-lifecycle keeps leases of live jobs and gives them back when a destroy finds the job ended
 * (LeaseRenewal: renew, release), the step-dispatcher gives a slot back the moment it ends a job
 * (SlotRelease), the reaper reclaims expired ones (ExpiredLeases). Only admission knows the limits.
 */
abstract class LeaseSets {
  protected readonly now: () => number;

  constructor(protected readonly sets: LeaseSetsOptions) {
    this.now = sets.now ?? Date.now;
  }

  protected keysFor(tenant: string): [string, string] {
    return [this.sets.keys.leasesGlobal, this.sets.keys.leasesTenant(tenant)];
  }

  /** Frees the slot (idempotent) and wakes one waiting scheduler; true when a slot was held. */
  async release(holder: string, tenant: string): Promise<boolean> {
    const keys = this.sets.keys;
    const reply = await RELEASE.run<number>(
      this.sets.redis,
      [...this.keysFor(tenant), keys.capacityFreed, keys.capacityWaiting],
      [holder],
    );
    return reply === 1;
  }

  /** Holders of a global slot with their expiry (ms). */
  async holders(): Promise<{ holder: string; expiresAt: number }[]> {
    const flat = await this.sets.redis.zrange(this.sets.keys.leasesGlobal, 0, -1, 'WITHSCORES');
    const out: { holder: string; expiresAt: number }[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      out.push({ holder: flat[i] as string, expiresAt: Number(flat[i + 1]) });
    }
    return out;
  }
}

/**
 * The scheduler's side: all checks and takes happen in one Lua script, so N scheduler replicas
 * never over-admit; expired holders are dropped on every acquire, so a slot held by a dead
 * process comes back without an operator.
 */
export class SlotAdmission extends LeaseSets {
  constructor(private readonly options: SlotAdmissionOptions) {
    super(options);
    if (!Number.isInteger(options.globalLimit) || options.globalLimit < 1) {
      throw new Error(`globalLimit must be a positive integer (got ${options.globalLimit})`);
    }
  }

  private tenantLimit(tenant: string): number {
    const limit = this.options.tenantLimit;
    return typeof limit === 'function' ? limit(tenant) : limit;
  }

  async acquire(holder: string, tenant: string): Promise<AcquireResult> {
    const reply = await ACQUIRE.run<number>(
      this.options.redis,
      this.keysFor(tenant),
      this.takeArgs(holder, tenant),
    );
    if (reply === 1) return { granted: true };
    return { granted: false, blockedBy: reply === 0 ? 'global' : 'tenant' };
  }

  /**
   * Takes a slot for a job in the waiting set and removes it from that set, in one script. The
   * job's own admission run then finds its lease held (acquire is idempotent) and passes: a
   * wake-up is only ever sent to a job that is sure to be admitted.
   */
  async reserve(holder: string, tenant: string): Promise<ReserveResult> {
    const reply = await RESERVE.run<number>(
      this.options.redis,
      [...this.keysFor(tenant), this.options.keys.capacityWaiting],
      this.takeArgs(holder, tenant),
    );
    if (reply === 1) return 'reserved';
    if (reply === 0) return 'global';
    if (reply === -1) return 'tenant';
    return 'gone';
  }

  /** True when `holder` has an unexpired slot (for instance one reserved while it was parking). */
  async holds(holder: string): Promise<boolean> {
    const expiresAt = await this.options.redis.zscore(this.options.keys.leasesGlobal, holder);
    return expiresAt !== null && Number(expiresAt) > this.now();
  }

  private takeArgs(holder: string, tenant: string): (string | number)[] {
    const now = this.now();
    return [holder, now, now + this.options.leaseMs, this.options.globalLimit, this.tenantLimit(tenant)];
  }

  /** Slots in use per tenant (SCAN of the tenant sets; for metrics, not for the hot path). */
  async inUseByTenant(): Promise<{ tenant: string; inUse: number }[]> {
    const prefix = this.options.keys.leasesTenant('');
    const out: { tenant: string; inUse: number }[] = [];
    for await (const batch of scanKeys(this.options.redis, { match: `${escapeGlob(prefix)}*`, count: 500 })) {
      for (const key of batch) {
        const tenant = key.slice(prefix.length);
        out.push({ tenant, inUse: await this.inUse(tenant) });
      }
    }
    return out;
  }

  async inUse(tenant?: string): Promise<number> {
    const key = tenant ? this.options.keys.leasesTenant(tenant) : this.options.keys.leasesGlobal;
    return this.options.redis.zcount(key, this.now(), '+inf');
  }
}

/** pod-lifecycle's side: keeps the leases of live jobs and frees them at destroy. */
export class LeaseRenewal extends LeaseSets {
  constructor(private readonly options: LeaseRenewalOptions) {
    super(options);
  }

  /** Extends a lease still held; false when it expired or was released (the slot is gone). */
  async renew(holder: string, tenant: string): Promise<boolean> {
    const now = this.now();
    const reply = await RENEW.run<number>(this.options.redis, this.keysFor(tenant), [
      holder,
      now + this.options.leaseMs,
      now,
    ]);
    return reply === 1;
  }
}

/**
 * The side of whoever ends a job (the step-dispatcher): the slot goes back at the job's end, not
 * after its sandbox's destroy. Release is a ZREM, so the destroy's own release later is a no-op
 * that wakes nobody: a slot is never given back twice.
 */
export class SlotRelease extends LeaseSets {}

/** The reaper's side: leases of dead holders. */
export class ExpiredLeases {
  constructor(private readonly options: LeaseSetsOptions) {}

  /** Drops expired global holders (dead processes) and returns them; wakes waiters for each. */
  async reclaimExpired(): Promise<string[]> {
    const { keys, redis } = this.options;
    return RECLAIM.run<string[]>(
      redis,
      [keys.leasesGlobal, keys.capacityFreed],
      [(this.options.now ?? Date.now)()],
    );
  }
}

/**
 * Ordering of jobs waiting for capacity: most urgent priority first, then oldest first.
 * Lower score = served earlier.
 */
export function waitingRank(priority: number, enqueuedAt: number): number {
  return (101 - priority) * 1e13 + enqueuedAt;
}
