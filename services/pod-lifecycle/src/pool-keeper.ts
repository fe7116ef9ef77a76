import {
  type KeySpace,
  type PoolMember,
  type RedisClient,
  tryLock,
  type WarmPoolStore,
} from '@sandstream/bus';
import type { DeclaredPool } from '@sandstream/sandbox';
import { sleep } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';
import type { PoolMembers } from './pool-members.js';
import { poolSpecHash } from './pool-spec.js';

/** Where the declared pools come from (the TemplateRegistry, reloaded when its file changes). */
export interface PoolSource {
  pools(): DeclaredPool[];
}

export interface PoolKeeperOptions {
  source: PoolSource;
  store: WarmPoolStore;
  members: PoolMembers;
  redis: RedisClient;
  keys: KeySpace;
  logger: Logger;
  /** Unclaimed members of all pools together; undefined: the sum of the pools' mins. */
  capacity: number | undefined;
  /**
   * Members this replica starts at once. Refills run beside the start worker, not through it, and
   * this bound keeps a refill after a burst from taking the backend from other templates' cold
   * starts.
   */
  refillConcurrency: number;
  intervalMs: number;
  /**
   * A ready member whose heartbeat is missing is retired only once this keeper has seen it
   * missing for this long. A heartbeat is a key with a TTL: a Redis restart can lose it (not yet
   * fsynced, or expired while Redis was down) although the agent is alive and sets it again
   * within a heartbeat period of reconnecting. 0: retired on the first miss.
   */
  heartbeatGraceMs: number;
  onProgress?: () => void;
}

/** How long a stop waits for members being started. */
const STOP_WAIT_MS = 5000;

/** A failing template is retried after this long at most (doubling from one interval). */
const MAX_BACKOFF_MS = 60_000;

/**
 * Keeps every declared pool at its `min` ready members, each pass:
 * - members that never became ready by their deadline, whose agent stopped heart-beating (its
 *   heartbeat missing for `heartbeatGraceMs`: a Redis restart loses heartbeats of live agents),
 *   or whose pool is no longer declared are retired (destroyed);
 * - members of an older version of their template (an edit) are replaced one per pass, and only
 *   once the pool has its min of the new version ready or no room to start one: gradually;
 * - members above min are retired (a shrink); missing ones are started within the pool's max
 *   and the global capacity (both checked in Redis by the reservation).
 * A pool that keeps failing backs off. Replicas plan a pool one at a time (a short lock), and
 * every change is an atomic script, so several keepers never multiply members.
 */
export class PoolKeeper {
  private readonly controller = new AbortController();
  private loop: Promise<void> | undefined;
  private readonly inflight = new Set<Promise<unknown>>();
  private readonly failures = new Map<string, { count: number; until: number }>();
  /** Ready members whose heartbeat this keeper found missing, and since when (its own clock). */
  private readonly missingSince = new Map<string, number>();

  constructor(private readonly options: PoolKeeperOptions) {}

  start(): void {
    this.loop ??= this.run();
  }

  /**
   * Stops planning, and gives members being started a few seconds to become ready. One still
   * starting after that stays `starting` in Redis: another replica's keeper retires it at its
   * deadline (and the reaper takes a sandbox left without a record).
   */
  async stop(): Promise<void> {
    this.controller.abort();
    await this.loop;
    await Promise.race([Promise.allSettled([...this.inflight]), sleep(STOP_WAIT_MS)]);
  }

  /** The global capacity in force: the setting, or what lets every pool reach its min. */
  capacity(pools: DeclaredPool[]): number {
    return this.options.capacity ?? pools.reduce((sum, p) => sum + p.min, 0);
  }

  /**
   * One pass over every pool, in a fixed number of round trips whatever the pools' sizes: the
   * pools' locks together, one read of every member, every ready member's heartbeat together;
   * then only the changes (retirements, reservations) cost a round trip each.
   */
  async tend(): Promise<void> {
    const pools = this.options.source.pools();
    const declared = new Map(pools.map((p) => [p.name, p]));
    // Locks first, then the read: what this pass plans for a pool is read after no other
    // replica can plan that pool any more (their changes came before our lock).
    const planned = await this.lockPools(pools);
    const all = await this.options.store.all();
    const unclaimed = all.filter((m) => m.state !== 'claimed');
    const unfit = await this.unfit(unclaimed, declared, Date.now());
    for (const [member, why] of unfit) await this.options.members.retire(member, why, member.state);
    const byPool = new Map<string, PoolMember[]>();
    for (const member of unclaimed) {
      if (unfit.has(member)) continue;
      byPool.set(member.pool, [...(byPool.get(member.pool) ?? []), member]);
    }
    const capacity = this.capacity(pools);
    for (const pool of planned) await this.tendPool(pool, capacity, byPool.get(pool.name) ?? []);
  }

  /**
   * The pools this replica plans in this pass: one planner per pool per interval, across
   * replicas. A lock is never deleted, only left to lapse: deleting it could free another
   * replica's. Should a pass outlast it, two planners may both start members, within max and the
   * capacity still (the reservation checks both).
   */
  private async lockPools(pools: DeclaredPool[]): Promise<DeclaredPool[]> {
    const { redis, keys, intervalMs } = this.options;
    const taken = await Promise.all(
      pools.map((pool) => tryLock(redis, keys.lock(`pool:${pool.name}`), intervalMs)),
    );
    return pools.filter((_, i) => taken[i]);
  }

  /** Members to retire, and why; every ready member's heartbeat is checked in one round trip. */
  private async unfit(
    members: PoolMember[],
    declared: Map<string, DeclaredPool>,
    now: number,
  ): Promise<Map<PoolMember, string>> {
    const { redis, keys } = this.options;
    const unfit = new Map<PoolMember, string>();
    const ready: PoolMember[] = [];
    for (const member of members) {
      if (!declared.has(member.pool)) unfit.set(member, 'pool no longer declared');
      else if (member.state === 'starting' && member.readyBy < now)
        unfit.set(member, 'not ready by its deadline');
      else if (member.state === 'ready') ready.push(member);
    }
    // Sent together (not awaited one by one): one round trip on a single node and on a Cluster.
    const alive = await Promise.all(ready.map((m) => redis.exists(keys.sandbox(m.id).heartbeat)));
    const seen = new Set<string>();
    ready.forEach((member, i) => {
      if (alive[i] !== 0) return;
      seen.add(member.id);
      const since = this.missingSince.get(member.id) ?? now;
      this.missingSince.set(member.id, since);
      if (now - since >= this.options.heartbeatGraceMs) unfit.set(member, 'agent stopped heart-beating');
    });
    // A heartbeat that came back (or a member gone) starts from nothing at its next miss.
    for (const id of this.missingSince.keys()) if (!seen.has(id)) this.missingSince.delete(id);
    return unfit;
  }

  /** Plans one pool whose lock this replica holds, from its unclaimed members read this pass. */
  private async tendPool(pool: DeclaredPool, capacity: number, mine: PoolMember[]): Promise<void> {
    const { members } = this.options;
    const hash = poolSpecHash(pool);
    const current = mine.filter((m) => m.specHash === hash);
    const stale = mine.filter((m) => m.specHash !== hash);
    const currentReady = current.filter((m) => m.state === 'ready');

    const oldest = stale.sort((a, b) => a.createdAt - b.createdAt)[0];
    if (oldest && (currentReady.length >= pool.min || mine.length >= pool.max)) {
      await members.retire(oldest, 'template changed', oldest.state);
    }
    // A shrink: idle members above min go, newest first (the oldest have proven themselves).
    const surplus = currentReady.length - pool.min;
    for (const extra of currentReady
      .sort((a, b) => b.createdAt - a.createdAt)
      .slice(0, Math.max(surplus, 0))) {
      await members.retire(extra, 'pool shrunk', 'ready');
    }

    const backoff = this.failures.get(pool.name);
    if (backoff && backoff.until > Date.now()) return;
    let missing = pool.min - current.length;
    while (missing > 0 && this.inflight.size < this.options.refillConcurrency) {
      const member = await members.reserve(pool, hash, capacity);
      if (!member) break;
      missing--;
      this.track(pool, member);
    }
  }

  private track(pool: DeclaredPool, member: PoolMember): void {
    const started = this.options.members.start(pool, member).then((ok) => {
      if (ok) {
        this.failures.delete(pool.name);
        return;
      }
      const count = (this.failures.get(pool.name)?.count ?? 0) + 1;
      const wait = Math.min(this.options.intervalMs * 2 ** count, MAX_BACKOFF_MS);
      this.failures.set(pool.name, { count, until: Date.now() + wait });
    });
    this.inflight.add(started);
    void started.finally(() => this.inflight.delete(started));
  }

  private async run(): Promise<void> {
    const signal = this.controller.signal;
    let failing = false;
    while (!signal.aborted) {
      try {
        await this.tend();
        if (failing) this.options.logger.info('warm pool upkeep works again');
        failing = false;
        this.options.onProgress?.();
      } catch (err) {
        if (!failing) this.options.logger.warn({ err: (err as Error).message }, 'warm pool upkeep failed');
        failing = true;
      }
      await sleep(this.options.intervalMs, signal);
    }
  }
}
