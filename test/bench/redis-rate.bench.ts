/**
 * Issue 28 §4: a quiet sandbox's `exec('true')` round trip while a neighbour sandbox floods Redis
 * with XADDs to its own stream (redis-benchmark, pipelined, as the neighbour's own Redis user),
 * against the same quiet sandbox alone, in one run: first with the rate limit off
 * (SANDBOX_REDIS_RATE_LIMIT=0), then with the step-dispatcher restarted at the operator's default.
 * In-process backend, services as processes, a private redis-server with `default` off and a user
 * per sandbox, as shipped. Goal: p50 with the limit on <= 2x alone.
 *
 *   npm run build && npx vite-node test/bench/redis-rate.bench.ts [floodSeconds] [aloneRounds]
 */
import { SANDBOX_USER_PREFIX } from '@sandstream/bus';
import { SandstreamClient } from '@sandstream/client';
import {
  closeDefaultRedisUser,
  type RunningService,
  startRedisServer,
  startService,
  startServices,
  summarize,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';

const FLOOD_SECONDS = Number(process.argv[2] ?? 10);
const ALONE_ROUNDS = Number(process.argv[3] ?? 300);
const ms = (n: number) => `${n.toFixed(2)} ms`;

type Sandbox = Awaited<ReturnType<SandstreamClient['sandboxes']['create']>>;

async function roundTrip(sandbox: Sandbox): Promise<number> {
  const t = performance.now();
  await sandbox.exec(['true']);
  return performance.now() - t;
}

async function main(): Promise<void> {
  const own = await startRedisServer();
  const adminUrl = await closeDefaultRedisUser(own);
  const namespace = uniqueNamespace('rbench');
  const env = {
    REDIS_URL: adminUrl,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    SANDBOX_ACL: 'on',
    LOG_LEVEL: 'warn',
  };
  const services: RunningService[] = await startServices({ ...env, SANDBOX_REDIS_RATE_LIMIT: '0' });
  const redis = new Redis(adminUrl);
  const client = new SandstreamClient({ redis, namespace });
  try {
    const quiet = await client.sandboxes.create({ id: `${namespace}-quiet`, image: 'debian:bookworm-slim' });
    // Warm both sides up (JIT, connections, page cache) before any baseline.
    for (let i = 0; i < 300; i++) await roundTrip(quiet);

    const phase = async (label: string) => {
      const alone: number[] = [];
      for (let i = 0; i < ALONE_ROUNDS; i++) alone.push(await roundTrip(quiet));
      const id = `${namespace}-flood-${label}`;
      const flooder = await client.sandboxes.create({ id, image: 'debian:bookworm-slim' });
      await flooder.exec('true');
      // Code in the sandbox holding its user's credentials (a second password added here).
      const user = `${SANDBOX_USER_PREFIX}${id}`;
      await redis.call('ACL', 'SETUSER', user, '>bench-only-password');
      const started = performance.now();
      const flood = Promise.resolve(
        flooder.exec(
          [
            'timeout',
            String(FLOOD_SECONDS),
            'redis-benchmark',
            ...['-h', '127.0.0.1', '-p', String(own.port), '--user', user, '-a', 'bench-only-password'],
            ...['-n', '1000000000', '-c', '8', '-P', '64', '-q'],
            ...['XADD', `sandbox:{${id}}:events`, 'MAXLEN', '~', '1000', '*', 'f', 'v'],
          ],
          { timeoutSeconds: FLOOD_SECONDS + 30 },
        ),
      ).catch(() => undefined);
      const busy: number[] = [];
      let stoppedAfter: number | undefined;
      while (performance.now() - started < FLOOD_SECONDS * 1000) {
        busy.push(await roundTrip(quiet));
        if (stoppedAfter === undefined && busy.length % 20 === 0 && (await flooder.info()).state === 'failed')
          stoppedAfter = (performance.now() - started) / 1000;
      }
      const info = (await (
        redis.call('XINFO', 'STREAM', `sandbox:{${id}}:events`) as Promise<unknown[]>
      ).catch(() => [])) as unknown[];
      const added = Number(info[info.indexOf('entries-added') + 1] ?? 0);
      await flood;
      await flooder.close().catch(() => undefined);
      const a = summarize(alone);
      const b = summarize(busy);
      console.log(`rate limit ${label}:`);
      console.log(`  alone:         p50 ${ms(a.p50)}  p99 ${ms(a.p99)}  (${a.n} rounds)`);
      console.log(
        `  next to flood: p50 ${ms(b.p50)}  p99 ${ms(b.p99)}  (${b.n} rounds in ${FLOOD_SECONDS} s)  ratio p50 ${(b.p50 / a.p50).toFixed(2)}x (goal <= 2x)`,
      );
      console.log(
        `  flooder: ${added.toLocaleString('en-US')} XADDs, ${stoppedAfter === undefined ? 'not stopped' : `stopped (${(await flooder.info()).reason}) ~${stoppedAfter.toFixed(1)} s after it started`}`,
      );
      return b.p50 / a.p50;
    };

    const off = await phase('off');
    // The same stack, the step-dispatcher restarted with the operator's default limit.
    const dispatcher = services.findIndex((s) => s.name === 'step-dispatcher');
    await services[dispatcher]?.stop();
    services[dispatcher] = await startService('step-dispatcher', env);
    const on = await phase('default');
    console.log(`ratios p50: limit off ${off.toFixed(2)}x, limit on ${on.toFixed(2)}x`);
    await quiet.close();
  } finally {
    await client.close();
    redis.disconnect();
    for (const s of services.reverse()) await s.stop();
    await own.stop();
  }
}

await main();
