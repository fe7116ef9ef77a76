/**
 * CPU per one-step job (issue 32 §3 goal: ≤ 1.5× the baseline's), summed over every process a
 * job costs, against a bare sandbox started the plain way in the same run:
 *
 * - ours: `K` jobs of one `true` step submitted at once through the SDK and waited for, the four
 *   services as processes on a private redis-server. Counted: each service's utime + stime and its
 *   exited, waited-for children's (the in-process agents with their spawners and steps), the
 *   redis-server, this process (the client), and on Docker the engine (dockerd, containerd and the
 *   shims and runc they start) and the sandbox containers.
 * - the baseline: `docker run --rm --network host <image> true` (the CLI, the engine, the
 *   container) on Docker; `node -e 0` in-process. `K` of them one after another.
 *
 * Processes that come and go (the CLI, shims, runc, containers) are counted through cgroup v1
 * `cpuacct` groups, which keep what their exited members used: the engine's two daemons are moved
 * into a group of their own for the run (and back after), so the shims and runc they start land
 * there too; the sandbox containers are created under their own cgroup parents (ours through
 * SANDSTREAM_DOCKER_CGROUP_PARENT, the baseline's through `--cgroup-parent`); the CLI runs in a
 * third group. Anything else using the engine during a window (another test) is counted in that
 * window's engine share: run it on an otherwise idle engine, or read the engine column with that
 * in mind. Needs root (cgroup writes). Rounds alternate which side goes first.
 *
 *   npm run build
 *   npx vite-node test/bench/job-cpu.bench.ts [jobs=20] [rounds=3] [inprocess,docker]
 *
 * To look inside: SANDSTREAM_AGENT_ENTRY=<script> runs the in-process agents through a wrapper
 * (`/usr/bin/time`, `perf record`), JOB_CPU_PRELOAD=<file.cjs> is `--require`d by every service
 * (`--cpu-prof` is not allowed in NODE_OPTIONS; a preload can start the inspector's profiler), and
 * JOB_CPU_COMMANDSTATS=1 prints Redis's commands per job (calls, time) after each of our windows,
 * JOB_CPU_SYSCALLS=1 each service's and Redis's read and write system calls per job (/proc/<pid>/io:
 * counts, not time, so they do not move with the machine's load).
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { SandstreamClient } from '@sandstream/client';
import {
  descendantPids,
  exitedChildrenCpuMs,
  findCarrierImage,
  processCpuMs,
  type RedisServer,
  type RunningService,
  startRedisServer,
  startServices,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';

const JOBS = Number(process.argv[2] ?? 20);
const ROUNDS = Number(process.argv[3] ?? 3);
const BACKENDS = (process.argv[4] ?? 'inprocess,docker').split(',');
const IMAGE = process.env.BENCH_IMAGE ?? 'sandstream/debian:bookworm';
/** JOB_CPU_COMMANDSTATS=1 prints Redis's commands per job for each of our windows. */
const COMMAND_STATS = process.env.JOB_CPU_COMMANDSTATS === '1';
/** JOB_CPU_SYSCALLS=1 prints each process's read and write system calls per job for each of our windows. */
const SYSCALLS = process.env.JOB_CPU_SYSCALLS === '1';
const CPUACCT = '/sys/fs/cgroup/cpuacct';
const GROUP = {
  engine: '/sandstream-bench-engine',
  cli: '/sandstream-bench-cli',
  ours: '/sandstream-bench-ours',
  base: '/sandstream-bench-base',
} as const;

/** A cpuacct group's total CPU in ms (its exited members and child groups included); 0 before it exists. */
function groupMs(group: string): number {
  const file = `${CPUACCT}${group}/cpuacct.usage`;
  return existsSync(file) ? Number(readFileSync(file, 'utf8')) / 1e6 : 0;
}

function moveTo(group: string, pid: number): void {
  writeFileSync(`${CPUACCT}${group}/cgroup.procs`, String(pid));
}

function pidsNamed(comm: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === comm;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** A process's own CPU and its waited-for children's, in ms; 0 once it is gone. */
function withChildrenMs(pid: number | undefined): number {
  if (!pid) return 0;
  try {
    return processCpuMs(pid) + exitedChildrenCpuMs(pid);
  } catch {
    return 0;
  }
}

/** A process's read and write system calls so far (syscr, syscw of /proc/<pid>/io); zeros once it is gone. */
function syscalls(pid: number | undefined): { reads: number; writes: number } {
  try {
    const io = readFileSync(`/proc/${pid}/io`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, 'm').exec(io)?.[1] ?? 0);
    return { reads: field('syscr'), writes: field('syscw') };
  } catch {
    return { reads: 0, writes: 0 };
  }
}

/** The container groups currently below a cgroup parent (a stopped container's group is removed). */
function liveContainerGroups(group: string): number {
  const dir = `${CPUACCT}${group}`;
  if (!existsSync(dir)) return 0;
  return readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).length;
}

async function until(what: string, done: () => boolean, timeoutMs = 120_000): Promise<void> {
  const t0 = Date.now();
  while (!done()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

type Parts = Record<string, number>;

interface Backend {
  name: 'inprocess' | 'docker';
  image: string;
  env: Record<string, string>;
  /** One bare sandbox start: the baseline. */
  bareArgv: string[];
}

function backends(): Backend[] {
  const carrier = findCarrierImage() ?? 'sandstream/agent-carrier:dev';
  const all: Backend[] = [
    {
      name: 'inprocess',
      image: 'none',
      env: {
        SANDBOX_TYPE: 'inprocess',
        ...(process.env.SANDSTREAM_AGENT_ENTRY
          ? { SANDSTREAM_AGENT_ENTRY: process.env.SANDSTREAM_AGENT_ENTRY }
          : {}),
      },
      bareArgv: [process.execPath, '-e', '0'],
    },
    {
      name: 'docker',
      image: IMAGE,
      env: {
        SANDBOX_TYPE: 'docker',
        SANDSTREAM_DOCKER_NETWORK: 'host',
        SANDSTREAM_ALLOW_OPEN_REDIS: '1',
        SANDSTREAM_AGENT_CARRIER_IMAGE: carrier,
        SANDSTREAM_DOCKER_CGROUP_PARENT: GROUP.ours,
      },
      bareArgv: ['docker', 'run', '--rm', '--network', 'host', '--cgroup-parent', GROUP.base, IMAGE, 'true'],
    },
  ];
  return all.filter((b) => BACKENDS.includes(b.name));
}

/** Runs argv inside the CLI group (the shell moves itself there, then execs) and waits for it. */
function runInCliGroup(argv: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      'sh',
      ['-c', `echo $$ > ${CPUACCT}${GROUP.cli}/cgroup.procs && exec "$@"`, 'sh', ...argv],
      { stdio: 'ignore' },
    );
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${argv.join(' ')} exited ${code}`)),
    );
  });
}

async function baselineWindow(backend: Backend): Promise<Parts> {
  const before = { cli: groupMs(GROUP.cli), engine: groupMs(GROUP.engine), container: groupMs(GROUP.base) };
  for (let i = 0; i < JOBS; i++) await runInCliGroup(backend.bareArgv);
  if (backend.name !== 'docker') return { cli: groupMs(GROUP.cli) - before.cli };
  return {
    cli: groupMs(GROUP.cli) - before.cli,
    engine: groupMs(GROUP.engine) - before.engine,
    container: groupMs(GROUP.base) - before.container,
  };
}

interface Stack {
  services: RunningService[];
  redis: RedisServer;
  client: SandstreamClient;
  connection: Redis;
  namespace: string;
}

function stackParts(stack: Stack, docker: boolean): Parts {
  const own = process.cpuUsage();
  const parts: Parts = { redis: withChildrenMs(stack.redis.pid), client: (own.user + own.system) / 1000 };
  for (const s of stack.services) parts[s.name] = withChildrenMs(s.child.pid);
  // pod-lifecycle's own share apart from its waited-for children's (the in-process agents; on
  // Docker the few helpers it runs): the services' own CPU is what a service change can cut.
  const lifecycle = stack.services.find((s) => s.name === 'pod-lifecycle')?.child.pid;
  if (lifecycle) {
    try {
      parts['pod-lifecycle'] = processCpuMs(lifecycle);
      parts['pod-lifecycle children'] = exitedChildrenCpuMs(lifecycle);
    } catch {
      // Gone: left as counted above.
    }
  }
  // In-process jobs use no engine: what it does then is another test's.
  if (docker) {
    parts.engine = groupMs(GROUP.engine);
    parts.containers = groupMs(GROUP.ours);
  }
  return parts;
}

/** Redis's commands per job over a window, from INFO commandstats (reset at the window's start). */
async function printCommandStats(connection: Redis, jobs: number): Promise<void> {
  const info = await connection.info('commandstats');
  const rows = [...info.matchAll(/^cmdstat_(\S+):calls=(\d+),usec=(\d+)/gm)].map((m) => ({
    command: m[1] as string,
    calls: Number(m[2]) / jobs,
    usec: Number(m[3]) / jobs,
  }));
  rows.sort((a, b) => b.usec - a.usec);
  const total = rows.reduce((a, r) => ({ calls: a.calls + r.calls, usec: a.usec + r.usec }), {
    calls: 0,
    usec: 0,
  });
  console.log(
    `  redis per job: ${total.calls.toFixed(1)} commands, ${(total.usec / 1000).toFixed(2)} ms in commands; ${rows
      .map((r) => `${r.command} ${r.calls.toFixed(1)}× ${(r.usec / 1000).toFixed(2)} ms`)
      .join(', ')}`,
  );
}

async function oursWindow(stack: Stack, backend: Backend, round: number): Promise<Parts> {
  const lifecycle = stack.services.find((s) => s.name === 'pod-lifecycle')?.child.pid as number;
  if (COMMAND_STATS) await stack.connection.call('CONFIG', 'RESETSTAT');
  const processes = [
    { name: 'redis', pid: stack.redis.pid },
    ...stack.services.map((s) => ({ name: s.name, pid: s.child.pid })),
  ];
  const callsBefore = processes.map((p) => syscalls(p.pid));
  const before = stackParts(stack, backend.name === 'docker');
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i++) {
    const { jobId } = await stack.client.submit({
      id: `${stack.namespace}-r${round}-${i}`,
      image: backend.image,
      steps: [{ command: 'true' }],
    });
    ids.push(jobId);
  }
  for (const id of ids) {
    const record = await stack.client.wait(id, { timeoutMs: 120_000 });
    if (record.state !== 'succeeded') throw new Error(`job ${id} ended ${record.state}`);
  }
  // A job's sandbox is torn down after its record ends: its CPU belongs to the job.
  await until('the sandboxes to be gone', () =>
    backend.name === 'docker'
      ? liveContainerGroups(GROUP.ours) === 0
      : descendantPids(lifecycle).length === 0,
  );
  await new Promise((r) => setTimeout(r, 500));
  const after = stackParts(stack, backend.name === 'docker');
  if (COMMAND_STATS) await printCommandStats(stack.connection, JOBS);
  if (SYSCALLS) {
    const perJobCalls = processes.map((p, i) => {
      const now = syscalls(p.pid);
      const was = callsBefore[i] ?? now;
      return `${p.name} ${((now.reads - was.reads) / JOBS).toFixed(1)} r / ${((now.writes - was.writes) / JOBS).toFixed(1)} w`;
    });
    console.log(`  system calls per job: ${perJobCalls.join(', ')}`);
  }
  const out: Parts = {};
  for (const [k, v] of Object.entries(after)) out[k] = v - (before[k] ?? 0);
  return out;
}

async function startStack(backend: Backend): Promise<Stack> {
  const redis = await startRedisServer();
  const namespace = uniqueNamespace(`jobcpu-${backend.name}`);
  const services = await startServices({
    ...backend.env,
    REDIS_URL: redis.url,
    SANDSTREAM_NAMESPACE: namespace,
    SCHEDULER_GLOBAL_SLOTS: '4',
    SCHEDULER_TENANT_SLOTS: '4',
    LOG_LEVEL: 'warn',
    LOG_ARCHIVE: 'off',
    ...(process.env.JOB_CPU_PRELOAD ? { NODE_OPTIONS: `--require ${process.env.JOB_CPU_PRELOAD}` } : {}),
  });
  const connection = new Redis(redis.url);
  const client = new SandstreamClient({ redis: connection, namespace });
  return { services, redis, client, connection, namespace };
}

async function stopStack(stack: Stack): Promise<void> {
  await stack.client.close();
  stack.connection.disconnect();
  for (const s of stack.services) await s.stop();
  await stack.redis.stop();
}

const sum = (p: Parts) => Object.values(p).reduce((a, b) => a + b, 0);
const perJob = (n: number) => (n / JOBS).toFixed(1);

async function measure(backend: Backend): Promise<void> {
  const stack = await startStack(backend);
  try {
    // Warm-up: one job and one bare start, so images and code are in the page cache on both sides.
    await oursWindow(stack, backend, -1);
    await runInCliGroup(backend.bareArgv);
    const oursTotal: Parts = {};
    const baseTotal: Parts = {};
    console.log(`\n## ${backend.name}: ${JOBS} jobs per window, load ${loadavg()[0]?.toFixed(1)}`);
    for (let round = 0; round < ROUNDS; round++) {
      const sides = round % 2 === 0 ? (['ours', 'base'] as const) : (['base', 'ours'] as const);
      const row: Record<string, Parts> = {};
      for (const side of sides)
        row[side] = side === 'ours' ? await oursWindow(stack, backend, round) : await baselineWindow(backend);
      const ours = row.ours as Parts;
      const base = row.base as Parts;
      for (const [k, v] of Object.entries(ours)) oursTotal[k] = (oursTotal[k] ?? 0) + v;
      for (const [k, v] of Object.entries(base)) baseTotal[k] = (baseTotal[k] ?? 0) + v;
      console.log(
        `round ${round}: ours ${perJob(sum(ours))} ms/job (${Object.entries(ours)
          .map(([k, v]) => `${k} ${perJob(v)}`)
          .join(', ')}); base ${perJob(sum(base))} ms/job (${Object.entries(base)
          .map(([k, v]) => `${k} ${perJob(v)}`)
          .join(', ')}); ratio ${(sum(ours) / sum(base)).toFixed(2)}, load ${loadavg()[0]?.toFixed(1)}`,
      );
    }
    const n = JOBS * ROUNDS;
    const fmt = (p: Parts) =>
      Object.entries(p)
        .map(([k, v]) => `${k} ${(v / n).toFixed(1)}`)
        .join(', ');
    console.log(
      `all rounds: ours ${(sum(oursTotal) / n).toFixed(1)} ms/job (${fmt(oursTotal)}); base ${(sum(baseTotal) / n).toFixed(1)} ms/job (${fmt(baseTotal)}); ratio ${(sum(oursTotal) / sum(baseTotal)).toFixed(2)} (goal ≤ 1.5)`,
    );
  } finally {
    await stopStack(stack);
  }
}

async function main(): Promise<void> {
  for (const g of Object.values(GROUP)) mkdirSync(`${CPUACCT}${g}`, { recursive: true });
  const daemons = [...pidsNamed('dockerd'), ...pidsNamed('containerd')];
  const home = new Map(daemons.map((pid) => [pid, readFileSync(`/proc/${pid}/cgroup`, 'utf8')]));
  for (const pid of daemons) moveTo(GROUP.engine, pid);
  try {
    for (const backend of backends()) await measure(backend);
  } finally {
    // The daemons go back where they were (the root group unless the host put them elsewhere).
    for (const [pid, cgroups] of home) {
      const line = cgroups.split('\n').find((l) => /:(cpu,cpuacct|cpuacct,cpu|cpuacct):/.test(l));
      const path = line?.slice(line.lastIndexOf(':') + 1) || '/';
      try {
        moveTo(path === '/' ? '' : path, pid);
      } catch (e) {
        console.error(`could not move ${pid} back to ${path}: ${(e as Error).message}`);
      }
    }
    try {
      execFileSync(
        'rmdir',
        [GROUP.cli, GROUP.engine].map((g) => `${CPUACCT}${g}`),
      );
    } catch {
      // A group still in use (a late shim) stays; it is empty once that exits.
    }
  }
}

await main();
