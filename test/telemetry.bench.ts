/**
 * What tracing costs: end-to-end throughput of one-step jobs with telemetry off and on, in the
 * same run, interleaved (off, on, off, on, …) so both see the same machine load. Each round
 * starts the four services fresh (in-process backend: one real agent process per job) on a
 * private redis-server; "on" sends every span (services and agents) over OTLP/HTTP protobuf to
 * an in-process receiver that decodes them, so its CPU cost is counted against "on" as well.
 *
 * The built code is first copied to a private directory and the services run from there: other
 * people rebuilding dist/ in the shared checkout during the run must not change the code under
 * test between rounds.
 *
 *   npx tsc -b libs/telemetry agent services/scheduler services/pod-lifecycle \
 *     services/step-dispatcher services/reaper && npx vite-node test/telemetry.bench.ts [jobs] [rounds]
 */
import { spawn } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { SandstreamClient } from '@sandstream/client';
import {
  freePort,
  pollUntil,
  repoRoot,
  startOtlpReceiver,
  startRedisServer,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { runOneStepJobs } from './helpers/one-step-jobs.js';

const JOBS = Number(process.argv[2] ?? 100);
const ROUNDS = Number(process.argv[3] ?? 3);
const SERVICES = ['scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper'] as const;

interface RoundResult {
  mode: 'off' | 'on';
  jobsPerSecond: number;
  /** CPU of the four services and every agent they started, per job (ms). */
  cpuMsPerJob: number;
  p50Ms: number;
  failed: number;
  spans: number;
}

/**
 * A frozen copy of every workspace package's package.json and dist/ (the agent's single
 * executable and bench builds left out), with a node_modules whose @sandstream packages point
 * into the copy and everything else at the checkout's node_modules.
 */
function snapshot(): string {
  const root = mkdtempSync(join(tmpdir(), 'telemetry-bench-'));
  const { workspaces } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    workspaces: string[];
  };
  const dirs = workspaces.flatMap((w) =>
    w.endsWith('/*') ? readdirSync(join(repoRoot, w.slice(0, -2))).map((d) => `${w.slice(0, -2)}/${d}`) : [w],
  );
  mkdirSync(join(root, 'node_modules', '@sandstream'), { recursive: true });
  for (const dir of dirs) {
    const manifest = join(repoRoot, dir, 'package.json');
    if (!existsSync(manifest)) continue;
    mkdirSync(join(root, dir), { recursive: true });
    cpSync(manifest, join(root, dir, 'package.json'));
    if (existsSync(join(repoRoot, dir, 'dist'))) {
      cpSync(join(repoRoot, dir, 'dist'), join(root, dir, 'dist'), {
        recursive: true,
        filter: (src) => !/(sandstream-agent$|[/]runtime$|[/]bench-build$)/.test(src),
      });
    }
    const { name } = JSON.parse(readFileSync(manifest, 'utf8')) as { name: string };
    const link = join(root, 'node_modules', name);
    symlinkSync(relative(join(link, '..'), join(root, dir)), link);
  }
  for (const entry of readdirSync(join(repoRoot, 'node_modules'))) {
    if (entry === '@sandstream' || entry === '.bin') continue;
    symlinkSync(join(repoRoot, 'node_modules', entry), join(root, 'node_modules', entry));
  }
  return root;
}

interface Service {
  stop(): Promise<void>;
}

/** `node <root>/services/<name>/dist/main.js`, ready once its health endpoint answers. */
async function startService(root: string, name: string, env: Record<string, string>): Promise<Service> {
  const port = await freePort();
  const child = spawn(process.execPath, [join(root, 'services', name, 'dist', 'main.js')], {
    env: { ...process.env, ...env, HEALTH_PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => {
    stderr = (stderr + c.toString()).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await pollUntil(
    `${name} ready`,
    async () => {
      if (child.exitCode !== null) throw new Error(`${name} exited: ${stderr}`);
      return fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
    },
    { timeoutMs: 30_000, intervalMs: 100 },
  ).catch((err: Error) => {
    throw new Error(`${err.message}: ${stderr}`);
  });
  return {
    stop: async () => {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * CPU time of this process's reaped children and, transitively, theirs (/proc/self/stat cutime
 * + cstime): the services, once they exited, including the agents pod-lifecycle reaped. Less
 * sensitive than wall-clock throughput to what else the shared machine is running.
 */
function childrenCpuMs(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 16 and 17 of proc(5), counted from 1; `fields` starts at field 3. Ticks of 10 ms.
  return (Number(fields[13]) + Number(fields[14])) * 10;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1
    ? (s[mid] ?? Number.NaN)
    : ((s[mid - 1] ?? Number.NaN) + (s[mid] ?? Number.NaN)) / 2;
};

async function round(
  root: string,
  redisUrl: string,
  mode: 'off' | 'on',
  otlpUrl: string,
  spansBefore: () => number,
) {
  const namespace = uniqueNamespace(`tbench-${mode}`);
  const env: Record<string, string> = {
    REDIS_URL: redisUrl,
    SANDSTREAM_NAMESPACE: namespace,
    SANDBOX_TYPE: 'inprocess',
    SCHEDULER_GLOBAL_SLOTS: '16',
    SCHEDULER_TENANT_SLOTS: '16',
    LOG_LEVEL: 'warn',
    ...(mode === 'on'
      ? { OTEL_EXPORTER_OTLP_ENDPOINT: otlpUrl, OTEL_METRICS_EXPORTER: 'none' }
      : { SANDSTREAM_TELEMETRY: 'off' }),
  };
  const services: Service[] = [];
  for (const name of SERVICES) services.push(await startService(root, name, env));
  const redis = new Redis(redisUrl);
  const client = new SandstreamClient({ redis, namespace });
  const spans0 = spansBefore();
  const cpu0 = childrenCpuMs();

  const { seconds, latencies, failed } = await runOneStepJobs(client, `${namespace}-`, JOBS);
  await client.close();
  redis.disconnect();
  // Stopping flushes the services' span batches, so the span count below is complete.
  await Promise.all(services.map((s) => s.stop()));
  return {
    mode,
    jobsPerSecond: JOBS / seconds,
    cpuMsPerJob: (childrenCpuMs() - cpu0) / JOBS,
    p50Ms: median(latencies),
    failed,
    spans: spansBefore() - spans0,
  } satisfies RoundResult;
}

async function main(): Promise<void> {
  const root = snapshot();
  const own = await startRedisServer({ args: ['--maxclients', '10000'] });
  const receiver = await startOtlpReceiver();
  const results: RoundResult[] = [];
  try {
    for (let r = 0; r < ROUNDS; r++) {
      for (const mode of r % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        const res = await round(root, own.url, mode, receiver.url, () => receiver.spans.length);
        results.push(res);
        console.log(
          `round ${r + 1} ${mode}: ${res.jobsPerSecond.toFixed(2)} jobs/s, CPU ${res.cpuMsPerJob.toFixed(0)} ms/job, p50 ${res.p50Ms.toFixed(0)} ms, failed ${res.failed}, spans ${res.spans}`,
        );
      }
    }
  } finally {
    await receiver.close();
    await own.stop();
    rmSync(root, { recursive: true, force: true });
  }
  const of = (mode: 'off' | 'on') => results.filter((r) => r.mode === mode);
  const off = median(of('off').map((r) => r.jobsPerSecond));
  const on = median(of('on').map((r) => r.jobsPerSecond));
  console.log(`\n## telemetry cost, ${JOBS} one-step jobs per round, ${ROUNDS} rounds per mode (medians)`);
  console.log(
    `off: ${off.toFixed(2)} jobs/s; on: ${on.toFixed(2)} jobs/s; cost ${((1 - on / off) * 100).toFixed(1)} %`,
  );
  const cpuOff = median(of('off').map((r) => r.cpuMsPerJob));
  const cpuOn = median(of('on').map((r) => r.cpuMsPerJob));
  console.log(
    `CPU per job (services + agents): off ${cpuOff.toFixed(0)} ms; on ${cpuOn.toFixed(0)} ms; cost ${((cpuOn / cpuOff - 1) * 100).toFixed(1)} %`,
  );
  console.log(`spans per job (on): ${(median(of('on').map((r) => r.spans)) / JOBS).toFixed(1)}`);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
