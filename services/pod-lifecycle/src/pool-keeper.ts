import type { KeySpace, PoolMember, RedisClient, WarmPoolStore } from '@sandstream/bus';
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
  onProgress?: () => void;
}

/** How long a stop waits for members being started. */
const STOP_WAIT_MS = 5000;

/** A failing template is retried after this long at most (doubling from one interval). */
const MAX_BACKOFF_MS = 60_000;

/**
 * Keeps every declared pool at its `min` ready members, each pass:
 * - members that never became ready by their deadline, whose agent stopped heart-beating, or
 *   whose pool is no longer declared are retired (destroyed);
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

  /** One pass over every pool. */
  async tend(): Promise<void> {
    const pools = this.options.source.pools();
    const declared = new Map(pools.map((p) => [p.name, p]));
    const all = await this.options.store.all();
    const unclaimed = all.filter((m) => m.state !== 'claimed');
    const now = Date.now();
    for (const member of unclaimed) {
      const why = await this.unfit(member, declared, now);
      if (why) await this.options.members.retire(member, why, member.state);
    }
    const capacity = this.capacity(pools);
    for (const pool of pools) await this.tendPool(pool, capacity);
  }

  private async unfit(member: PoolMember, declared: Map<string, DeclaredPool>, now: number) {
    if (!declared.has(member.pool)) return 'pool no longer declared';
    if (member.state === 'starting' && member.readyBy < now) return 'not ready by its deadline';
    if (member.state === 'ready') {
      const heartbeat = this.options.keys.sandbox(member.id).heartbeat;
      if ((await this.options.redis.exists(heartbeat)) === 0) return 'agent stopped heart-beating';
    }
    return undefined;
  }

  private async tendPool(pool: DeclaredPool, capacity: number): Promise<void> {
    const { redis, keys, store, members } = this.options;
    // One planner per pool per interval, across replicas. The lock is never deleted, only left to
    // lapse: deleting it could free another replica's. Should a pass outlast it, two planners
    // may both start members, within max and the capacity still (the reservation checks both).
    const lock = keys.lock(`pool:${pool.name}`);
    if ((await redis.set(lock, '1', 'PX', this.options.intervalMs, 'NX')) !== 'OK') return;
    const hash = poolSpecHash(pool);
    const mine = (await store.all()).filter((m) => m.pool === pool.name && m.state !== 'claimed');
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
