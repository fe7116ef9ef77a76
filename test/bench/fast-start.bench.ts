/**
 * Fast start, part 1 (issue 18 §3): the whole start path against what a bare sandbox costs on the
 * same machine, in one run. The four services run as processes on a private redis-server; per
 * backend (in-process, Docker):
 *
 * - submit -> first stdout line of `echo hi`, one job at a time (4 slots), every run cold (a new
 *   sandbox per job), with its baselines timed in the same loop: the bare-Node floor (spawn ->
 *   a raw SET answered, libs/test-support/src/bare-node-floor.ts) and, on Docker, `docker run --rm
 *   <image> echo hi` to its line. Goals: in-process p50 <= 2x the floor; Docker p50 <= 1.3x
 *   (docker run + floor).
 * - one-step jobs/s (`true`) at 1, 4 and 16 slots, against the rate the machine starts bare
 *   sandboxes at the same concurrency: floors in-process, `docker run --rm <image> true` on
 *   Docker. Goal >= 0.5x.
 * - in those throughput runs, CPU per job of each service (utime + stime from /proc) and, for
 *   the in-process backend, of the agents (pod-lifecycle's exited children: each agent with its
 *   spawner helper and its step); on Docker the agents run under containerd, so their CPU is
 *   not seen here (test/bench/agent-boot.bench.ts measures an agent's boot alone).
 *
 * It uses only the services' processes, the SDK and test-support, so the same file measures an
 * older commit too (copy it and test/helpers there, build, run).
 *
 *   npx tsc -b && npx vite-node test/bench/fast-start.bench.ts [runs=50] [jobs=40] [inprocess,docker]
 *
 * Docker needs the local images and a carrier: SANDSTREAM_AGENT_CARRIER_IMAGE (default
 * sandstream/agent-carrier:dev), BENCH_IMAGE (default sandstream/debian:bookworm).
 */
import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import { promisify } from 'node:util';
import { SandstreamClient } from '@sandstream/client';
import {
  exitedChildrenCpuMs,
  floorArgv,
  msToFirstLine,
  percentile,
  processCpuMs,
  type RedisServer,
  type RunningService,
  ratePerSecond,
  startRedisServer,
  startServices,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { runOneStepJobs } from '../helpers/one-step-jobs.js';

const run = promisify(execFile);
const RUNS = Number(process.argv[2] ?? 50);
const JOBS = Number(process.argv[3] ?? 40);
const BACKENDS = (process.argv[4] ?? 'inprocess,docker').split(',');
const SLOT_LEVELS = [1, 4, 16];
const IMAGE = process.env.BENCH_IMAGE ?? 'sandstream/debian:bookworm';
const CARRIER = process.env.SANDSTREAM_AGENT_CARRIER_IMAGE ?? 'sandstream/agent-carrier:dev';

interface Backend {
  name: 'inprocess' | 'docker';
  image: string;
  env: Record<string, string>;
  /** The bare sandbox start the throughput is compared with, and its name. */
  bare: { name: string; start: (i: number) => Promise<unknown> };
}

const p50 = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    50,
  );
const p99 = (xs: number[]) =>
  percentile(
    [...xs].sort((a, b) => a - b),
    99,
  );
const ms = (n: number) => `${n.toFixed(0)} ms`;
const load = () => (loadavg()[0] as number).toFixed(1);

async function withServices<T>(
  server: RedisServer,
  backend: Backend,
  slots: number,
  body: (client: SandstreamClient, services: RunningService[], namespace: string) => Promise<T>,
): Promise<T> {
  const namespace = uniqueNamespace(`fast-${backend.name}-${slots}`);
  const services = await startServices({
    ...backend.env,
    REDIS_URL: server.url,
    SANDSTREAM_NAMESPACE: namespace,
    SCHEDULER_GLOBAL_SLOTS: String(slots),
    SCHEDULER_TENANT_SLOTS: String(slots),
    LOG_LEVEL: 'warn',
  });
  const redis = new Redis(server.url);
  const client = new SandstreamClient({ redis, namespace });
  try {
    // One job first: every service has loaded what a job needs, the image is in the page cache.
    const warm = await client.submit({
      id: `${namespace}-warm`,
      image: backend.image,
      steps: [{ command: 'true' }],
    });
    await client.wait(warm.jobId, { timeoutMs: 60_000 });
    return await body(client, services, namespace);
  } finally {
    await client.close();
    redis.disconnect();
    for (const s of services) await s.stop();
  }
}

/** Submit -> the first stdout line of `echo hi`, read from the job's timeline as a user would. */
async function submitToFirstLine(client: SandstreamClient, id: string, image: string): Promise<number> {
  const started = performance.now();
  const { jobId } = await client.submit({ id, image, steps: [{ command: 'echo', args: ['hi'] }] });
  let first: number | undefined;
  for await (const item of client.follow(jobId)) {
    if (first === undefined && item.type === 'output' && item.stream === 'stdout' && item.line === 'hi')
      first = performance.now() - started;
  }
  if (first === undefined) throw new Error(`job ${jobId} ended without printing hi`);
  return first;
}

async function latency(server: RedisServer, backend: Backend): Promise<void> {
  const loadBefore = load();
  const rows = await withServices(server, backend, 4, async (client, _services, namespace) => {
    const ours: number[] = [];
    const floor: number[] = [];
    const bare: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      ours.push(await submitToFirstLine(client, `${namespace}-l${i}`, backend.image));
      floor.push(await msToFirstLine(floorArgv(server.port, `floor:${namespace}:${i}`, 'exit'), 'ok'));
      if (backend.name === 'docker')
        bare.push(
          await msToFirstLine(
            ['docker', 'run', '--rm', '--network', 'host', backend.image, 'echo', 'hi'],
            'hi',
          ),
        );
    }
    return { ours, floor, bare };
  });
  const { ours, floor, bare } = rows;
  console.log(
    `\n### ${backend.name}: submit -> first stdout line of \`echo hi\` (n=${RUNS}, load ${loadBefore} -> ${load()})`,
  );
  console.log('| measure | p50 | p99 |');
  console.log('|---|---|---|');
  console.log(`| Sandstream, submit -> "hi" | ${ms(p50(ours))} | ${ms(p99(ours))} |`);
  console.log(`| floor: bare node, raw SET answered | ${ms(p50(floor))} | ${ms(p99(floor))} |`);
  if (backend.name === 'docker') {
    console.log(
      `| \`docker run --rm ${backend.image} echo hi\` -> "hi" | ${ms(p50(bare))} | ${ms(p99(bare))} |`,
    );
    const base = p50(bare) + p50(floor);
    console.log(`ratio p50 / (docker run + floor) = ${(p50(ours) / base).toFixed(2)} (goal <= 1.3)`);
  } else {
    console.log(`ratio p50 / floor = ${(p50(ours) / p50(floor)).toFixed(2)} (goal <= 2)`);
  }
}

async function throughput(server: RedisServer, backend: Backend): Promise<void> {
  console.log(
    `\n### ${backend.name}: one-step jobs/s (${JOBS} jobs of \`true\` submitted at once) and CPU per job`,
  );
  console.log(
    `| slots | jobs/s | ${backend.bare.name}/s, same concurrency | ratio (goal >= 0.5) | failed | CPU ms/job: scheduler, pod-lifecycle, step-dispatcher, reaper${backend.name === 'inprocess' ? ', agent' : ''} | load |`,
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const slots of SLOT_LEVELS) {
    const measured = await withServices(server, backend, slots, async (client, services, namespace) => {
      const pods = services.find((s) => s.name === 'pod-lifecycle');
      const cpu = () => [
        ...services.map((s) => processCpuMs(s.child.pid as number)),
        exitedChildrenCpuMs(pods?.child.pid as number),
      ];
      const before = cpu();
      const result = await runOneStepJobs(client, `${namespace}-t`, JOBS, backend.image);
      // Destroys end just after the jobs: let them finish so their cost is counted.
      await new Promise((r) => setTimeout(r, 1500));
      const after = cpu();
      return { result, perJob: after.map((a, k) => (a - (before[k] as number)) / JOBS) };
    });
    const ours = JOBS / measured.result.seconds;
    const bare = await ratePerSecond(JOBS, slots, backend.bare.start);
    const cpu = measured.perJob
      .slice(0, backend.name === 'inprocess' ? 5 : 4)
      .map((c) => c.toFixed(1))
      .join(', ');
    console.log(
      `| ${slots} | ${ours.toFixed(2)} | ${bare.toFixed(2)} | ${(ours / bare).toFixed(2)} | ${measured.result.failed} | ${cpu} | ${load()} |`,
    );
  }
}

async function main(): Promise<void> {
  const server = await startRedisServer({ args: ['--maxclients', '10000'] });
  const backends: Backend[] = [];
  if (BACKENDS.includes('inprocess'))
    backends.push({
      name: 'inprocess',
      image: 'none',
      env: { SANDBOX_TYPE: 'inprocess' },
      bare: {
        name: 'bare-node floors',
        start: (i) => msToFirstLine(floorArgv(server.port, `floor:rate:${i}`, 'exit'), 'ok'),
      },
    });
  if (BACKENDS.includes('docker')) {
    // Fails here, not halfway through, when an image is missing.
    await run('docker', ['image', 'inspect', IMAGE, CARRIER]);
    backends.push({
      name: 'docker',
      image: IMAGE,
      env: {
        SANDBOX_TYPE: 'docker',
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDSTREAM_AGENT_CARRIER_IMAGE: CARRIER,
      },
      bare: {
        name: '`docker run --rm … true`',
        start: () => run('docker', ['run', '--rm', '--network', 'host', IMAGE, 'true']),
      },
    });
  }
  console.log(`## fast start (issue 18 §3), ${new Date().toISOString()}, carrier ${CARRIER}`);
  try {
    for (const backend of backends) {
      await latency(server, backend);
      await throughput(server, backend);
    }
  } finally {
    await server.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
