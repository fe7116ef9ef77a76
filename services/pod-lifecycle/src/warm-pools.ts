import {
  type AgentAnnouncements,
  type KeySpace,
  PoolClaimCounts,
  type RedisClient,
  type SandboxAcl,
  WarmPoolStore,
} from '@sandstream/bus';
import { type SandboxBackend, TemplateRegistry } from '@sandstream/sandbox';
import type { Logger, SandstreamMetrics } from '@sandstream/telemetry';
import { Cluster } from 'ioredis';
import type { PodLifecycleEnv } from './pod-lifecycle-config.js';
import { PoolKeeper } from './pool-keeper.js';
import { PoolMembers } from './pool-members.js';
import { WarmStart } from './warm-start.js';

export interface WarmPoolsDeps {
  env: PodLifecycleEnv;
  logger: Logger;
  redis: RedisClient;
  keys: KeySpace;
  backend: SandboxBackend;
  acl: SandboxAcl | null;
  announcements: AgentAnnouncements;
  installation: string;
  installationId?: () => string;
  metrics: SandstreamMetrics;
  agentRedisUrl: string;
  agentEnv?: Record<string, string>;
}

export interface WarmPools {
  store: WarmPoolStore;
  start: WarmStart;
  keeper: PoolKeeper;
  close(): Promise<void>;
}

/**
 * Warm pools as pod-lifecycle runs them: the templates file (watched; an edit resizes pools and
 * replaces members of a changed template), the keeper that fills them, and the claim of the start
 * path. Null without a templates file, and on a Redis Cluster (an agent there is routed to its
 * job's node, which a member booted before its job cannot know).
 */
export async function openWarmPools(deps: WarmPoolsDeps): Promise<WarmPools | null> {
  const { env, logger, metrics } = deps;
  if (!env.SANDSTREAM_TEMPLATES_FILE) return null;
  if (deps.redis instanceof Cluster) {
    logger.warn('warm pools are off on a Redis Cluster: every start is cold');
    return null;
  }
  const registry = await TemplateRegistry.open({
    path: env.SANDSTREAM_TEMPLATES_FILE,
    onReload: (event) =>
      event.ok
        ? logger.info({ templates: event.templates }, 'templates reloaded; pools follow')
        : logger.error({ err: event.error.message }, 'templates file invalid; keeping the previous pools'),
  });
  const store = new WarmPoolStore(deps.redis, deps.keys);
  const members = new PoolMembers({
    store,
    redis: deps.redis,
    keys: deps.keys,
    backend: deps.backend,
    acl: deps.acl,
    announcements: deps.announcements,
    agentRedisUrl: deps.agentRedisUrl,
    ...(deps.agentEnv ? { agentEnv: deps.agentEnv } : {}),
    installation: deps.installation,
    ...(deps.installationId ? { installationId: deps.installationId } : {}),
    owner: `${process.pid}`,
    logger,
    onRefilled: (pool, seconds) => metrics.poolRefillSeconds.record(seconds, { pool }),
  });
  const keeper = new PoolKeeper({
    source: registry,
    store,
    members,
    redis: deps.redis,
    keys: deps.keys,
    logger,
    capacity: env.SANDSTREAM_POOL_CAPACITY,
    refillConcurrency: env.POOL_REFILL_CONCURRENCY,
    intervalMs: env.POOL_KEEPER_INTERVAL_MS,
    heartbeatGraceMs: env.POOL_HEARTBEAT_GRACE_MS,
  });
  const claimCounts = new PoolClaimCounts(deps.redis, deps.keys);
  // Counted in Redis too, for GET /v1/pools; a failed count must not fail the claim.
  const count = (pool: string, outcome: 'hit' | 'miss') =>
    void claimCounts
      .record(pool, outcome)
      .catch((err) => logger.warn({ err, pool }, 'pool claim count not recorded'));
  const start = new WarmStart({
    source: registry,
    store,
    members,
    redis: deps.redis,
    keys: deps.keys,
    acl: deps.acl,
    announcements: deps.announcements,
    logger,
    bindTimeoutMs: env.POOL_CLAIM_TIMEOUT_SECONDS * 1000,
    onHit: (pool, seconds) => {
      metrics.poolHits.add(1, { pool });
      count(pool, 'hit');
      metrics.poolClaimSeconds.record(seconds, { pool });
    },
    onMiss: (pool, reason) => {
      metrics.poolMisses.add(1, { pool, reason });
      count(pool, 'miss');
    },
  });
  metrics.observePoolMembers(async () => {
    const counts = new Map<string, number>();
    for (const m of await store.all()) {
      if (m.state === 'claimed') continue;
      const key = `${m.pool}\u0000${m.state}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return [...counts].map(([key, members]) => {
      const [pool, state] = key.split('\u0000') as [string, string];
      return { pool, state, members };
    });
  });
  logger.info(
    { pools: registry.pools().map((p) => ({ name: p.name, min: p.min, max: p.max })) },
    'warm pools declared',
  );
  return {
    store,
    start,
    keeper,
    async close() {
      await keeper.stop();
      registry.close();
    },
  };
}
