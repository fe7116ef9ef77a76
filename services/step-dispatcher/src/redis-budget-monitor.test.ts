import { createKeySpace, isRedisBudgetReason, SandboxAcl, type SandboxRedisUsage } from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { OverBudgetStop } from './over-budget-stop.js';
import { RedisBudgetMonitor } from './redis-budget-monitor.js';

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

  it('finds the sandbox over its budget among running ones, and only it, at the next tick after a flood', async () => {
    const over: SandboxRedisUsage[] = [];
    const monitor = new RedisBudgetMonitor({
      redis: own.redis,
      logger,
      budgetBytes: 4 * MB,
      intervalMs: 100,
      // Far off: only the growth of Redis can make the second tick measure.
      measureEveryMs: 3_600_000,
      runningJobs: async () => ['flooder', 'quiet'],
      lockKey: keySpace.lock('redis-budget'),
      onOverBudget: async (usage) => {
        over.push(usage);
      },
    });
    await own.redis.set(keySpace.sandbox('quiet').heartbeat, 'x');
    await fill(keySpace.sandbox('not-running').results, 6); // not ours to judge
    await monitor.tick(); // the first tick measures, to know where Redis stands
    expect(over).toEqual([]);
    expect(monitor.lastMeasured).toBe(1);

    // A sandbox writes any key of its own: the budget counts all of them together.
    await fill(keySpace.sandbox('flooder').results, 3);
    await fill(`${keySpace.sandboxPrefix('flooder')}anything-it-likes`, 3);
    await new Promise((resolve) => setTimeout(resolve, 150)); // past the lock of the last round
    await monitor.tick();
    expect(over.map((u) => u.jobId)).toEqual(['flooder']);
    expect(over[0]?.bytes).toBeGreaterThan(6 * MB);
    expect(over[0]?.keys.map((k) => k.key).sort()).toEqual(
      [keySpace.sandbox('flooder').results, `${keySpace.sandboxPrefix('flooder')}anything-it-likes`].sort(),
    );

    // Reported once, not at every measure while its stop is under way.
    await new Promise((resolve) => setTimeout(resolve, 150));
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

    const failed: string[] = [];
    const stop = new OverBudgetStop({
      redis: own.redis,
      keySpace,
      budgetBytes: 200 * 1024,
      logger,
      dispatcher: {
        failRunning: async (id, reasonOf) => {
          failed.push(`${id}: ${await reasonOf()}`);
        },
      },
    });
    const usage: SandboxRedisUsage = {
      jobId,
      bytes: 4 * MB,
      keys: [
        { key: keys.results, bytes: 2 * MB },
        { key: `${keys.prefix}junk`, bytes: 2 * MB },
        { key: keys.events, bytes: 100 * 1024 },
      ],
    };
    await stop.stop(usage);

    // Its connection is gone and it cannot come back.
    await expect(agent.ping()).rejects.toThrow();
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
});
