/**
 * A sandbox's `exec('true')` round trip next to a noisy neighbour sandbox, against the same
 * sandbox alone, in one run on the Docker backend (services as processes, a private
 * redis-server, the operator's default resource policy). Neighbours: `yes` (CPU), a fork bomb
 * (bounded by the pids limit), a disk filler (the workspace volume, rewritten in a loop).
 * Goal: p50 <= 2x alone for each.
 *
 *   npm run build && npx vite-node test/bench/neighbour-load.bench.ts [rounds]
 */
import { SandstreamClient } from '@sandstream/client';
import { startRedisServer, startServices, summarize, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';

const ROUNDS = Number(process.argv[2] ?? 200);
const IMAGE = process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static';
const ms = (n: number) => `${n.toFixed(2)} ms`;

const LOADS: Record<string, string> = {
  yes: 'yes > /dev/null',
  'fork bomb': 'b() { b | b & }; b; sleep 3600',
  'disk filler':
    'while true; do dd if=/dev/zero of=fill bs=1M count=256 conv=fsync 2>/dev/null; rm -f fill; done',
};

type Sandbox = Awaited<ReturnType<SandstreamClient['sandboxes']['create']>>;

async function roundTrips(sandbox: Sandbox, rounds: number): Promise<number[]> {
  const latencies: number[] = [];
  for (let i = 0; i < rounds + 20; i++) {
    const t = performance.now();
    await sandbox.exec(['true']);
    // The first rounds warm both sides up; not counted.
    if (i >= 20) latencies.push(performance.now() - t);
  }
  return latencies;
}

async function main(): Promise<void> {
  const own = await startRedisServer();
  const namespace = uniqueNamespace('nbench');
  const services = await startServices({
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'docker',
    // A private Redis on loopback with an open `default` user: a benchmark, not a boundary.
    SANDSTREAM_DOCKER_NETWORK: 'host',
    SANDSTREAM_ALLOW_OPEN_REDIS: '1',
    SANDSTREAM_AGENT_CARRIER_IMAGE:
      process.env.SANDSTREAM_AGENT_CARRIER_IMAGE ?? 'sandstream/agent-carrier:dev',
    LOG_LEVEL: 'warn',
  });
  const redis = new Redis(own.url);
  const client = new SandstreamClient({ redis, namespace });
  try {
    const measured = await client.sandboxes.create({ id: `${namespace}-m`, image: IMAGE });
    // Warm both sides up first (JIT, connections, page cache): an early baseline measured cold
    // made every later ratio look better, and a late one worse, than the load deserved.
    await roundTrips(measured, 300);
    console.log(
      `exec('true') round trip on Docker, ${ROUNDS} rounds each; each load against the alone run just before it`,
    );
    const worst: string[] = [];
    for (const [name, script] of Object.entries(LOADS)) {
      const alone = summarize(await roundTrips(measured, ROUNDS));
      const neighbour = await client.sandboxes.create({
        id: `${namespace}-${name.replace(' ', '-')}`,
        image: IMAGE,
      });
      const load = Promise.resolve(neighbour.exec(script)).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 2000));
      const busy = summarize(await roundTrips(measured, ROUNDS));
      // Removing the container ends the load, whatever it spawned.
      await neighbour.close();
      await load;
      const ratio = busy.p50 / alone.p50;
      worst.push(`${name} ${ratio.toFixed(2)}x`);
      console.log(`  alone:            p50 ${ms(alone.p50)}  p99 ${ms(alone.p99)}`);
      console.log(
        `  next to ${`${name}:`.padEnd(13)}p50 ${ms(busy.p50)}  p99 ${ms(busy.p99)}  ratio p50 ${ratio.toFixed(2)}x (goal <= 2x)`,
      );
    }
    console.log(`  ratios: ${worst.join(', ')}`);
    await measured.close();
  } finally {
    await client.close();
    redis.disconnect();
    for (const s of services.reverse()) await s.stop();
    await own.stop();
  }
}

await main();
