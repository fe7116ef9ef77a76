/**
 * gVisor against runc, through the services on the Docker backend (SANDBOX_TYPE=docker, a private
 * redis-server, the local busybox image), interleaved so drift in the machine's load hits both:
 *
 * 1. Cold start: `client.sandboxes.create()` until the sandbox takes commands (container create
 *    and start, the agent's first heartbeat, the services' ready notice).
 * 2. `exec(['true'])` round trip in one live sandbox: the agent forks and waits for `true`, so
 *    gVisor's syscall interception (ptrace platform here) shows up in full.
 *
 *   npm run build && npx vite-node test/bench/gvisor.bench.ts [starts] [rounds]
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SandstreamClient } from '@sandstream/client';
import { startRedisServer, startServices, summarize, uniqueNamespace } from '@sandstream/test-support';
import { Redis } from 'ioredis';

const STARTS = Number(process.argv[2] ?? 8);
const ROUNDS = Number(process.argv[3] ?? 200);
const IMAGE = process.env.SANDSTREAM_TEST_IMAGE_BUSYBOX ?? 'sandstream/busybox:static';
const RUNTIMES = ['runc', 'gvisor'] as const;
type Runtime = (typeof RUNTIMES)[number];

const ms = (n: number) => `${n.toFixed(1)} ms`;
// A live sandbox names its runtime through a template (the request itself cannot ask for one).
// runc is the engine's default: no runtimeClass at all, as every sandbox without one runs.
const spec = (runtime: Runtime) => ({ template: runtime });
function templatesFile(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'sandstream-gvbench-')), 'templates.yaml');
  const yaml = `templates:\n  runc:\n    image: ${IMAGE}\n  gvisor:\n    image: ${IMAGE}\n    runtimeClass: gvisor\n`;
  writeFileSync(file, yaml);
  return file;
}

async function main(): Promise<void> {
  const own = await startRedisServer();
  const namespace = uniqueNamespace('gvbench');
  const services = await startServices({
    REDIS_URL: own.url,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'docker',
    // A private Redis on loopback with an open `default` user: a benchmark, not a boundary.
    SANDSTREAM_DOCKER_NETWORK: 'host',
    SANDSTREAM_ALLOW_OPEN_REDIS: '1',
    SANDSTREAM_TEMPLATES_FILE: templatesFile(),
    LOG_LEVEL: 'warn',
  });
  const redis = new Redis(own.url);
  const client = new SandstreamClient({ redis, namespace });
  const starts: Record<Runtime, number[]> = { runc: [], gvisor: [] };
  const execs: Record<Runtime, number[]> = { runc: [], gvisor: [] };
  try {
    for (let i = 0; i < STARTS; i++) {
      for (const runtime of RUNTIMES) {
        const t = performance.now();
        const sandbox = await client.sandboxes.create({
          id: `${namespace}-${runtime}-${i}`,
          ...spec(runtime),
        });
        starts[runtime].push(performance.now() - t);
        await sandbox.close();
      }
    }
    const live = Object.fromEntries(
      await Promise.all(
        RUNTIMES.map(
          async (runtime) =>
            [
              runtime,
              await client.sandboxes.create({ id: `${namespace}-${runtime}-rt`, ...spec(runtime) }),
            ] as const,
        ),
      ),
    );
    // In slices of 20, alternating, after 20 warm-up rounds each.
    for (let i = 0; i < ROUNDS + 20; i += 20) {
      for (const runtime of RUNTIMES) {
        for (let j = 0; j < 20; j++) {
          const t = performance.now();
          await live[runtime]?.exec(['true']);
          if (i >= 20) execs[runtime].push(performance.now() - t);
        }
      }
    }
    await Promise.all(Object.values(live).map((s) => s?.close()));

    const s = { runc: summarize(starts.runc), gvisor: summarize(starts.gvisor) };
    const e = { runc: summarize(execs.runc), gvisor: summarize(execs.gvisor) };
    console.log(`cold start (create until ready), ${s.runc.n} each, ${IMAGE}`);
    for (const r of RUNTIMES) console.log(`  ${r.padEnd(6)} p50 ${ms(s[r].p50)}  p99 ${ms(s[r].p99)}`);
    console.log(`  gVisor/runc p50 ${(s.gvisor.p50 / s.runc.p50).toFixed(2)}x`);
    console.log(`exec('true') round trip through the services, ${e.runc.n} rounds each`);
    for (const r of RUNTIMES) console.log(`  ${r.padEnd(6)} p50 ${ms(e[r].p50)}  p99 ${ms(e[r].p99)}`);
    console.log(`  gVisor/runc p50 ${(e.gvisor.p50 / e.runc.p50).toFixed(2)}x`);
  } finally {
    await client.close();
    redis.disconnect();
    await Promise.all(services.map((svc) => svc.stop(15_000)));
    await own.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
