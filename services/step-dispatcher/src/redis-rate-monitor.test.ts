import {
  createKeySpace,
  isRedisRateReason,
  parseClientList,
  SandboxAcl,
  type SandboxRedisCounters,
  type SandboxRedisRate,
  sandboxRedisRates,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { overRate } from './over-rate.js';
import { RedisRateMonitor } from './redis-rate-monitor.js';
import { recordingOverLimitStop } from './testing/recording-stop.js';

const logger = silentLogger('redis-rate-test');

// A private redis-server: the monitor reads Redis' command total, CLIENT LIST and SCANs sandbox keys.
describe('per-sandbox Redis rate', () => {
  const own = usePrivateRedis();
  const keySpace = createKeySpace('rate');
  const acl = () => new SandboxAcl(own.redis, keySpace);

  /** A connection as the sandbox's own Redis user, as its agent (or code that read its credentials) holds. */
  const asSandbox = async (jobId: string) => {
    const credentials = await acl().create(jobId, 'notify-stream');
    const client = new Redis(own.server.url, {
      username: credentials.username,
      password: credentials.password,
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
    });
    client.on('error', () => {});
    return client;
  };

  /**
   * Writes as fast as one connection can until stopped or cut off: pipelines of XADDs that keep
   * the stream short (so its memory stays tiny) and LPUSHes to a key of its own choosing.
   */
  const flood = (client: Redis, jobId: string) => {
    let on = true;
    const done = (async () => {
      const keys = keySpace.sandbox(jobId);
      while (on) {
        const pipeline = client.pipeline();
        for (let i = 0; i < 200; i++) {
          pipeline.xadd(keys.events, 'MAXLEN', '~', '100', '*', 'line', 'x');
          pipeline.lpush(`${keys.prefix}anything`, 'y');
        }
        pipeline.del(`${keys.prefix}anything`);
        const replies = await pipeline.exec().catch(() => null);
        if (!replies || replies.some(([err]) => err)) return;
      }
    })();
    return {
      stop: async () => {
        on = false;
        await done;
      },
      done,
    };
  };

  const monitorOf = (running: string[], over: SandboxRedisRate[], limitPerSecond = 5_000) =>
    new RedisRateMonitor({
      redis: own.redis,
      logger,
      limitPerSecond,
      intervalMs: 300,
      windowMs: 600,
      runningJobs: async () => running,
      lockKey: keySpace.lock(`redis-rate-${Math.random()}`),
      onOverRate: async (rate) => {
        over.push(rate);
      },
    });

  it('finds the sandbox flooding its own keys, and not a quiet one, though it keeps them tiny', async () => {
    const flooder = await asSandbox('flooder');
    const quiet = await asSandbox('quiet');
    const over: SandboxRedisRate[] = [];
    const monitor = monitorOf(['flooder', 'quiet'], over);
    const writes = flood(flooder, 'flooder');
    // The quiet one writes a line now and then, as an idle shell's agent does.
    const ticking = setInterval(() => void quiet.xadd(keySpace.sandbox('quiet').events, '*', 'l', 'x'), 50);
    try {
      monitor.start();
      await vi.waitUntil(() => over.length > 0, { timeout: 20_000, interval: 50 });
    } finally {
      clearInterval(ticking);
      await monitor.stop();
      await writes.stop();
    }
    expect(over.map((r) => r.jobId)).toEqual(['flooder']);
    expect(over[0]?.perSecond).toBeGreaterThan(5_000);
    // Redis 7.0 counts no commands per connection: the keys' own counts are what is read here.
    expect(over[0]?.source).toBe('keys');
    expect(monitor.lastRates.find((r) => r.jobId === 'quiet')?.perSecond ?? 0).toBeLessThan(100);
    // Its memory stayed far below any budget: only the rate gives it away.
    expect(Number(await own.redis.memory('USAGE', keySpace.sandbox('flooder').events))).toBeLessThan(
      64 * 1024,
    );
    flooder.disconnect();
    quiet.disconnect();
    await acl().delete('flooder');
    await acl().delete('quiet');
  }, 30_000);

  it('reads nothing but one INFO per tick while Redis as a whole is under the limit', async () => {
    const busy = await asSandbox('busy-but-under');
    const over: SandboxRedisRate[] = [];
    const monitor = monitorOf(['busy-but-under'], over, 1_000_000);
    const writes = flood(busy, 'busy-but-under');
    try {
      for (let i = 0; i < 5; i++) {
        await monitor.tick();
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await writes.stop();
    }
    expect(over).toEqual([]);
    expect(monitor.lastRates).toEqual([]);
    busy.disconnect();
    await acl().delete('busy-but-under');
  });

  it('cuts a sandbox over its rate off Redis and fails it with the rate in the reason', async () => {
    const flooder = await asSandbox('cut-off');
    const writes = flood(flooder, 'cut-off');
    const { stop, failed } = recordingOverLimitStop({ redis: own.redis, keySpace, logger });
    const rate = { jobId: 'cut-off', perSecond: 123_456, source: 'keys', windowMs: 300 } as const;
    await stop.stop(overRate(rate, 5_000));
    // The flood ends by itself: its connection was killed, and it cannot log in again.
    await writes.done;
    const retry = new Redis(own.server.url, { lazyConnect: true, retryStrategy: () => null });
    retry.on('error', () => {});
    await expect(retry.call('AUTH', acl().username('cut-off'), 'any')).rejects.toThrow(/WRONGPASS|disabled/);
    retry.disconnect();
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatch(/^cut-off: over its Redis rate: .*123,456 writes .*limit of 5,000 per second/);
    expect(isRedisRateReason(failed[0]?.slice('cut-off: '.length))).toBe(true);
    flooder.disconnect();
    await acl().delete('cut-off');
  });
});

describe('per-sandbox rates from two readings', () => {
  const reading = (
    source: SandboxRedisCounters['source'],
    at: number,
    counts: Record<string, Record<string, number>>,
  ): SandboxRedisCounters => ({
    source,
    at,
    counts: new Map(Object.entries(counts).map(([job, c]) => [job, new Map(Object.entries(c))])),
    measured: new Set(Object.keys(counts)),
    commands: 0,
  });

  it("uses a newer server's per-connection tot-cmds where CLIENT LIST reports it", () => {
    // A line as Redis 8 writes it (fields it adds later are skipped; none is required but these).
    const [client] = parseClientList(
      'id=7 addr=127.0.0.1:33676 laddr=127.0.0.1:6379 fd=13 name= age=1438 idle=0 flags=N db=0 cmd=xadd user=sandstream-sbx-a redir=-1 resp=2 io-thread=0 tot-net-in=1145 tot-net-out=265388 tot-cmds=41\n',
    );
    expect(client?.get('tot-cmds')).toBe('41');
    expect(client?.get('user')).toBe('sandstream-sbx-a');
    expect(client?.get('name')).toBe('');
  });

  it('counts a new connection or key from zero, a shrunk list as nothing, and a sandbox first seen not at all', () => {
    const before = reading('keys', 1_000, { a: { '0:s': 100, '0:l': 50 } });
    const after = reading('keys', 1_500, {
      a: { '0:s': 600, '0:l': 10, '0:new': 20 },
      b: { '0:s': 1_000_000 },
    });
    const rates = sandboxRedisRates(before, after);
    // a: 500 entries added + 0 (popped) + 20 (new key) in half a second; b: read for the first time.
    expect(rates).toEqual([{ jobId: 'a', perSecond: 1_040, source: 'keys', windowMs: 500 }]);
    const connections = sandboxRedisRates(
      reading('connections', 0, { a: { '0:1': 10 } }),
      reading('connections', 1_000, { a: { '0:1': 110, '0:2': 5 }, b: { '0:3': 7 } }),
    );
    expect(connections.map((r) => [r.jobId, r.perSecond])).toEqual([
      ['a', 105],
      ['b', 7],
    ]);
    expect(sandboxRedisRates(before, reading('connections', 2_000, {}))).toEqual([]);
  });
});
