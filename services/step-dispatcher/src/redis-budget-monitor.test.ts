import { createKeySpace, isRedisBudgetReason, SandboxAcl, type SandboxRedisUsage } from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { overBudget } from './over-budget.js';
import { RedisBudgetMonitor } from './redis-budget-monitor.js';
import { recordingOverLimitStop } from './testing/recording-stop.js';

const MB = 1024 * 1024;
const logger = silentLogger('redis-budget-test');

// A private redis-server: the monitor reads INFO and SCANs the whole key space.
describe('per-sandbox Redis budget', () => {
  const own = usePrivateRedis();
  const keySpace = createKeySpace('budget');

  /** Fills `key` with `mb` values of 1 MiB each. */
  const fill = async (key: string, mb: number) => {
    for (let i = 0; i < mb; i++) await own.redis.lpush(key, Buffer.alloc(MB, i));
  };
  // A round holds a short SET NX PX lock (so replicas do not multiply the SCANs): the next tick
  // measures only once it has expired.
  const lockReleased = () =>
    vi.waitUntil(async () => (await own.redis.exists(keySpace.lock('redis-budget'))) === 0, {
      timeout: 20_000,
      interval: 10,
    });

  /** A monitor with a 4 MiB budget over `runningJobs`, recording the sandboxes it finds over it. */
  const collectingMonitor = (runningJobs: string[], lockName: string) => {
    const over: SandboxRedisUsage[] = [];
    const monitor = new RedisBudgetMonitor({
      redis: own.redis,
      logger,
      budgetBytes: 4 * MB,
      intervalMs: 100,
      // Far off: after the first tick, only the growth of Redis can make a tick measure.
      measureEveryMs: 3_600_000,
      runningJobs: async () => runningJobs,
      lockKey: keySpace.lock(lockName),
      onOverBudget: async (usage) => {
        over.push(usage);
      },
    });
    return { monitor, over };
  };

  it('finds the sandbox over its budget among running ones, and only it, at the next tick after a flood', async () => {
    const { monitor, over } = collectingMonitor(['flooder', 'quiet'], 'redis-budget');
    await own.redis.set(keySpace.sandbox('quiet').heartbeat, 'x');
    await fill(keySpace.sandbox('not-running').results, 6); // not ours to judge
    await monitor.tick(); // the first tick measures, to know where Redis stands
    expect(over).toEqual([]);
    expect(monitor.lastMeasured).toBe(1);

    // A sandbox writes any key of its own: the budget counts all of them together.
    await fill(keySpace.sandbox('flooder').results, 3);
    await fill(`${keySpace.sandboxPrefix('flooder')}anything-it-likes`, 3);
    await lockReleased(); // the last round's lock expired: this tick may measure
    await monitor.tick();
    expect(over.map((u) => u.jobId)).toEqual(['flooder']);
    expect(over[0]?.bytes).toBeGreaterThan(6 * MB);
    expect(over[0]?.keys.map((k) => k.key).sort()).toEqual(
      [keySpace.sandbox('flooder').results, `${keySpace.sandboxPrefix('flooder')}anything-it-likes`].sort(),
    );

    // Reported once, not at every measure while its stop is under way.
    await lockReleased();
    await fill(keySpace.sandbox('flooder').results, 3);
    await monitor.tick();
    expect(over).toHaveLength(1);
  });

  it('cuts the sandbox off Redis, fails it with the budget in the reason, and frees what it stored', async () => {
    const jobId = 'cut-off';
    const keys = keySpace.sandbox(jobId);
    const acl = new SandboxAcl(own.redis, keySpace);
    const credentials = await acl.create(jobId, 'notify-stream');
    const agent = new Redis(own.server.url, {
      username: credentials.username,
      password: credentials.password,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    agent.on('error', () => {});
    await agent.xadd(keys.events, '*', 'line', 'x'.repeat(1000));
    for (let i = 0; i < 99; i++) await agent.xadd(keys.events, '*', 'line', 'x'.repeat(1000));
    await agent.lpush(keys.results, Buffer.alloc(2 * MB));
    await agent.lpush(`${keys.prefix}junk`, Buffer.alloc(2 * MB));

    const { stop, failed } = recordingOverLimitStop({ redis: own.redis, keySpace, logger });
    const usage: SandboxRedisUsage = {
      jobId,
      bytes: 4 * MB,
      keys: [
        { key: keys.results, db: 0, bytes: 2 * MB },
        { key: `${keys.prefix}junk`, db: 0, bytes: 2 * MB },
        { key: keys.events, db: 0, bytes: 100 * 1024 },
      ],
    };
    await stop.stop(overBudget(usage, { budgetBytes: 200 * 1024, redis: own.redis, keySpace }));

    // Its connection is gone and it cannot come back.
    await expect(agent.set(keys.heartbeat, 'x')).rejects.toThrow();
    const retry = new Redis(own.server.url);
    await expect(retry.call('AUTH', credentials.username, credentials.password)).rejects.toThrow(
      /WRONGPASS|disabled/,
    );
    retry.disconnect();
    // The job failed, naming the budget (sandbox records read it back as `redis-budget`).
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatch(/^cut-off: over its Redis budget: .*4 MB.*budget of 0\.2 MB/);
    expect(isRedisBudgetReason(failed[0]?.slice('cut-off: '.length))).toBe(true);
    // What it stored is freed; its newest output lines stay, within a quarter of the budget.
    expect(await own.redis.exists(keys.results, `${keys.prefix}junk`)).toBe(0);
    const left = await own.redis.xlen(keys.events);
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThanOrEqual(50);
    await acl.delete(jobId);
  });

  it('counts what a sandbox stored in another database (an older ACL let it SELECT) and frees it there when it stops it', async () => {
    const jobId = 'db-hopper';
    const keys = keySpace.sandbox(jobId);
    // As an old ACL allowed: the sandbox's own pattern, in database 1.
    const db1 = new Redis(`${own.server.url}/1`);
    try {
      await db1.lpush(`${keys.prefix}elsewhere`, Buffer.alloc(MB), Buffer.alloc(MB, 1), Buffer.alloc(MB, 2));
      await db1.lpush(
        `${keys.prefix}elsewhere-too`,
        Buffer.alloc(MB),
        Buffer.alloc(MB, 1),
        Buffer.alloc(MB, 2),
      );
      await db1.set('not-a-sandbox-key', 'stays');
      await db1.set(`${keySpace.sandboxPrefix('neighbour')}own`, 'stays');
      await own.redis.xadd(keys.events, '*', 'line', 'last words');
      await own.redis.set(keys.heartbeat, 'x');

      const { monitor, over } = collectingMonitor([jobId, 'neighbour'], 'redis-budget-db');
      await monitor.tick();
      expect(over.map((u) => u.jobId)).toEqual([jobId]);
      expect(over[0]?.bytes).toBeGreaterThan(6 * MB);
      expect(
        over[0]?.keys
          .filter((k) => k.db === 1)
          .map((k) => k.key)
          .sort(),
      ).toEqual([`${keys.prefix}elsewhere`, `${keys.prefix}elsewhere-too`].sort());

      const { stop, failed } = recordingOverLimitStop({ redis: own.redis, keySpace, logger });
      const usage = over[0] as SandboxRedisUsage;
      await stop.stop(overBudget(usage, { budgetBytes: 4 * MB, redis: own.redis, keySpace }));
      expect(isRedisBudgetReason(failed[0]?.slice(`${jobId}: `.length))).toBe(true);
      // Freed in database 1 as in its own; nothing else there, nor its events and heartbeat here.
      expect(await db1.exists(`${keys.prefix}elsewhere`, `${keys.prefix}elsewhere-too`)).toBe(0);
      expect(await db1.get('not-a-sandbox-key')).toBe('stays');
      expect(await db1.get(`${keySpace.sandboxPrefix('neighbour')}own`)).toBe('stays');
      expect(await own.redis.xlen(keys.events)).toBe(1);
      expect(await own.redis.exists(keys.heartbeat)).toBe(1);
    } finally {
      await db1.unlink('not-a-sandbox-key', `${keySpace.sandboxPrefix('neighbour')}own`);
      db1.disconnect();
    }
  });
});
