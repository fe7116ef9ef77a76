/**
 * The agent's boot against the bare-Node floor (issue 18 §1), in one run: from spawn to the
 * first heartbeat SET reaching Redis, and the CPU the process (and the spawner helper it starts)
 * used by then. The floor is a bare `node` that opens a raw socket to the same Redis and sends
 * one SET. Every run is timed by a keyspace notification from a private redis-server, so nothing
 * polls; the CPU is read from /proc the moment the notification arrives (the process still
 * runs), as the threads' schedstat run time (ns) rather than stat's 10 ms ticks.
 *
 * Variants, interleaved round-robin so the machine's load hits all alike:
 * - floor: `node -e <raw SET>`;
 * - the single executable through its bundled loader (how every container starts it);
 * - `node dist/sandstream-agent.cjs` (the package's bin; what the in-process backend ran before
 *   it ran the single executable);
 * - with BOOT_BEFORE=<dir> (a copy of an older agent/dist: sandstream-agent, sandstream-agent.cjs,
 *   runtime/lib), the same two for that build, for before/after in the same loop;
 * - with BOOT_COMPARE=<label>=<dir>[,…] (each such a copy, e.g. a `--no-snapshot` build), the same
 *   two for each, under its label.
 *
 *   npx tsc -b && npx vite-node test/bench/agent-boot.bench.ts [runs]
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { floorArgv, percentile, repoRoot, rssKb } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { HeartbeatWatch, stopChild } from '../helpers/heartbeat-boot.js';

const RUNS = Number(process.argv[2] ?? 20);
if (!Number.isInteger(RUNS) || RUNS < 1 || RUNS > 1000)
  throw new Error('runs must be a whole number 1..1000');

interface Variant {
  name: string;
  /** The command for one boot; the agent variants get --redis-url and --job-id appended. */
  argv: (redisUrl: string, port: number, key: string, jobId: string) => string[];
}

function agentVariants(label: string, dist: string): Variant[] {
  const binary = join(dist, 'sandstream-agent');
  const lib = join(dist, 'runtime', 'lib');
  const agentArgs = (url: string, jobId: string) => ['--redis-url', url, '--job-id', jobId];
  return [
    {
      name: `${label}: single executable via its loader`,
      argv: (url, _p, _k, jobId) => [
        join(lib, 'ld-linux-x86-64.so.2'),
        '--library-path',
        lib,
        binary,
        ...agentArgs(url, jobId),
      ],
    },
    {
      name: `${label}: node sandstream-agent.cjs`,
      argv: (url, _p, _k, jobId) => [
        process.execPath,
        join(dist, 'sandstream-agent.cjs'),
        ...agentArgs(url, jobId),
      ],
    },
  ];
}

interface Sample {
  ms: number;
  cpuMs: number;
  rssMb: number;
}

async function main(): Promise<void> {
  const watch = await HeartbeatWatch.start();
  const { server, redis } = watch;

  const variants: Variant[] = [
    {
      name: 'floor: bare node, raw socket, one SET',
      argv: (_u, port, key) => floorArgv(port, key),
    },
    ...agentVariants('after', join(repoRoot, 'agent', 'dist')),
  ];
  const before = process.env.BOOT_BEFORE;
  if (before) {
    if (!existsSync(join(before, 'sandstream-agent')))
      throw new Error(`BOOT_BEFORE=${before} holds no sandstream-agent`);
    variants.push(...agentVariants('before', before));
  }
  for (const entry of (process.env.BOOT_COMPARE ?? '').split(',').filter(Boolean)) {
    const [label, dir] = entry.split('=');
    if (!label || !dir || !existsSync(join(dir, 'sandstream-agent')))
      throw new Error(`BOOT_COMPARE entry ${entry}: expected <label>=<dir holding sandstream-agent>`);
    variants.push(...agentVariants(label, dir));
  }

  async function once(variant: Variant): Promise<Sample> {
    const jobId = `boot-${randomBytes(6).toString('hex')}`;
    const keys = sandboxKeys(jobId);
    const argv = variant.argv(server.url, server.port, keys.heartbeat, jobId);
    const { child, ms, cpuMs } = await watch.boot(argv, keys.heartbeat);
    try {
      return { ms, cpuMs, rssMb: rssKb(child.pid as number) / 1024 };
    } finally {
      await stopChild(child);
      await redis.unlink(keys.heartbeat, keys.in, keys.events, keys.results);
    }
  }

  // One untimed boot each: the page cache holds every binary, as it does on a busy node.
  for (const v of variants) await once(v);
  const samples = variants.map(() => [] as Sample[]);
  const loadBefore = loadavg()[0] as number;
  for (let i = 0; i < RUNS; i++) {
    for (const [k, v] of variants.entries()) samples[k]?.push(await once(v));
  }
  const loadAfter = loadavg()[0] as number;
  await watch.close();

  const median = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      50,
    );
  const p90 = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      90,
    );
  const floor = samples[0] as Sample[];
  const floorMs = median(floor.map((s) => s.ms));
  const floorCpu = median(floor.map((s) => s.cpuMs));
  console.log(
    `\n## agent boot vs the bare-Node floor (${RUNS} runs each, load average ${loadBefore.toFixed(1)} -> ${loadAfter.toFixed(1)})`,
  );
  console.log('| boot | to SET p50 ms | p90 ms | ×floor | CPU p50 ms | p90 ms | ×floor | RSS at SET MB |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [k, v] of variants.entries()) {
    const s = samples[k] as Sample[];
    const ms = s.map((x) => x.ms);
    const cpu = s.map((x) => x.cpuMs);
    console.log(
      `| ${v.name} | ${median(ms).toFixed(0)} | ${p90(ms).toFixed(0)} | ${(median(ms) / floorMs).toFixed(2)} | ${median(cpu).toFixed(0)} | ${p90(cpu).toFixed(0)} | ${(median(cpu) / floorCpu).toFixed(2)} | ${median(s.map((x) => x.rssMb)).toFixed(1)} |`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
