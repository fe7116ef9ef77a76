/**
 * CPU per `exec(['true'])` on live sandboxes, summed over every process involved, and the whole
 * system's exec rate with 1, 10 and 50 sandboxes each running `true` back to back.
 *
 * Each build (this worktree, and a baseline build given as a second repository root) runs on a
 * private redis-server of its own, with the four services as processes and the in-process
 * backend; the client is a process of its own too (test/bench/exec-load.mjs, importing that
 * build's SDK). CPU is utime + stime (+ cutime + cstime: children waited for, such as each
 * command's `true`) from /proc/<pid>/stat of: redis-server, each service and every descendant
 * of it (the agents, their spawners), and the client. Redis' INFO commandstats, reset at the
 * start of each window, gives the commands per exec.
 *
 * The floor: a long-lived Node process spawning `true` in a loop, its children's CPU included,
 * measured in the same run, between the builds.
 *
 *   npm run build
 *   npx vite-node test/bench/exec-cpu.bench.ts [seconds=10] [levels=1,10,50] [rounds=2] [baseline root]
 *
 * With EXEC_CPU_PROFILE_DIR set, the services, the client and the agents run with --cpu-prof
 * and write their profiles there (this build only; one level, one round is enough).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import {
  descendantPids,
  freePort,
  pollUntil,
  type RedisServer,
  repoRoot,
  startRedisServer,
  uniqueNamespace,
} from '@sandstream/test-support';
import { Redis } from 'ioredis';

const SECONDS = Number(process.argv[2] ?? 10);
const LEVELS = (process.argv[3] ?? '1,10,50').split(',').map(Number);
const ROUNDS = Number(process.argv[4] ?? 2);
const BASELINE_ROOT = process.argv[5];
const PROFILE_DIR = process.env.EXEC_CPU_PROFILE_DIR;
const SERVICES = ['scheduler', 'pod-lifecycle', 'step-dispatcher', 'reaper'] as const;
const TICK_MS = 10;

/** utime + stime + cutime + cstime of a process, in ms; undefined once it is gone. */
function cpuWithChildrenMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_MS;
  } catch {
    return undefined;
  }
}

type Group = 'redis' | 'client' | 'agents' | (typeof SERVICES)[number];

/** CPU of each process of each group at one moment. */
function snapshot(groups: Record<Group, number[]>): Map<number, { group: Group; ms: number }> {
  const map = new Map<number, { group: Group; ms: number }>();
  for (const [group, pids] of Object.entries(groups) as [Group, number[]][]) {
    for (const pid of pids) {
      const ms = cpuWithChildrenMs(pid);
      if (ms !== undefined) map.set(pid, { group, ms });
    }
  }
  return map;
}

function cpuDelta(
  before: Map<number, { group: Group; ms: number }>,
  after: Map<number, { group: Group; ms: number }>,
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [pid, { group, ms }] of after) out[group] = (out[group] ?? 0) + ms - (before.get(pid)?.ms ?? 0);
  return out;
}

/** Node refuses --cpu-prof in NODE_OPTIONS: the agents start through a wrapper that passes it. */
function profiledAgent(root: string): string {
  const path = `${PROFILE_DIR}/agent.sh`;
  writeFileSync(
    path,
    `#!/bin/sh\nexec ${process.execPath} --cpu-prof --cpu-prof-dir=${PROFILE_DIR} ${root}/agent/dist/main.js "$@"\n`,
    { mode: 0o755 },
  );
  return path;
}

interface Stack {
  root: string;
  redis: RedisServer;
  services: { name: (typeof SERVICES)[number]; child: ChildProcess }[];
  namespace: string;
  stop: () => Promise<void>;
}

async function startStack(root: string, profile: boolean): Promise<Stack> {
  const redis = await startRedisServer({ args: ['--maxclients', '10000'] });
  const namespace = uniqueNamespace('xcpu');
  const services: Stack['services'] = [];
  for (const name of SERVICES) {
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        ...(profile
          ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=${name}.cpuprofile`]
          : []),
        `${root}/services/${name}/dist/main.js`,
      ],
      {
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '/tmp',
          REDIS_URL: redis.url,
          SANDSTREAM_NAMESPACE: namespace,
          SANDBOX_TYPE: 'inprocess',
          SANDSTREAM_AGENT_ENTRY: profile ? profiledAgent(root) : `${root}/agent/dist/main.js`,
          SCHEDULER_GLOBAL_SLOTS: '80',
          SCHEDULER_TENANT_SLOTS: '80',
          LOG_LEVEL: 'warn',
          HEALTH_PORT: String(port),
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      },
    );
    services.push({ name, child });
    await pollUntil(
      `${name} ready`,
      async () => {
        if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
        const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        return res?.status === 200 ? true : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 50 },
    );
  }
  return {
    root,
    redis,
    services,
    namespace,
    stop: async () => {
      // Agents are detached (they outlive a pod-lifecycle): any a close did not end yet would
      // retry a stopped Redis forever and load the next measurements. Ended here by pid.
      const lifecycle = services.find((s) => s.name === 'pod-lifecycle')?.child.pid;
      const agents = lifecycle === undefined ? [] : descendantPids(lifecycle);
      await Promise.all(
        services.map(
          ({ child }) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null) return resolve();
              child.once('exit', () => resolve());
              child.kill('SIGTERM');
              setTimeout(() => child.kill('SIGKILL'), 15_000).unref();
            }),
        ),
      );
      for (const pid of agents) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
      await redis.stop();
    },
  };
}

interface Measurement {
  commands: number;
  p50: number;
  p99: number;
  seconds: number;
  cpu: Record<string, number>;
  redisCommands: Record<string, number>;
}

function lines(child: ChildProcess): AsyncIterator<string> {
  return createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
}

async function measure(stack: Stack, count: number, profile: boolean): Promise<Measurement> {
  const load = spawn(
    process.execPath,
    [
      ...(profile
        ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, '--cpu-prof-name=client.cpuprofile']
        : []),
      `${repoRoot}test/bench/exec-load.mjs`,
      stack.root,
      stack.redis.url,
      stack.namespace,
      `x${count}-${Date.now()}`,
      String(count),
      String(SECONDS),
    ],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const out = lines(load);
  if ((await out.next()).value !== 'ready') throw new Error('the load process did not get ready');
  const admin = new Redis(stack.redis.url);
  const groups = (): Record<Group, number[]> => {
    const byName = Object.fromEntries(stack.services.map((s) => [s.name, s.child.pid!]));
    return {
      redis: [stack.redis.pid!],
      client: [load.pid!],
      agents: descendantPids(byName['pod-lifecycle']!),
      scheduler: [byName.scheduler!],
      'pod-lifecycle': [byName['pod-lifecycle']!],
      'step-dispatcher': [byName['step-dispatcher']!],
      reaper: [byName.reaper!],
    };
  };
  await admin.config('RESETSTAT');
  const before = snapshot(groups());
  const started = performance.now();
  load.stdin!.write('go\n');
  const result = JSON.parse((await out.next()).value as string) as {
    commands: number;
    p50: number;
    p99: number;
  };
  const seconds = (performance.now() - started) / 1000;
  const after = snapshot(groups());
  const stats = (await admin.info('commandstats')) as string;
  const redisCommands: Record<string, number> = {};
  for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== 'info' && m[1] !== 'config') redisCommands[m[1]!] = Number(m[2]);
  }
  load.stdin!.write('close\n');
  await new Promise((resolve) => load.once('exit', resolve));
  admin.disconnect();
  return { ...result, seconds, cpu: cpuDelta(before, after), redisCommands };
}

/** A long-lived Node process spawning `true` one after another; CPU per spawn, children included. */
function nodeSpawnFloor(spawns: number): Promise<number> {
  const script = `
    const { spawn } = require('node:child_process');
    const { readFileSync } = require('node:fs');
    const cpu = () => {
      const s = readFileSync('/proc/self/stat', 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      return (+f[11] + +f[12] + +f[13] + +f[14]) * ${TICK_MS};
    };
    const once = () => new Promise((resolve) => spawn('true', [], { stdio: 'ignore' }).once('exit', resolve));
    (async () => {
      for (let i = 0; i < 50; i++) await once();
      const before = cpu();
      for (let i = 0; i < ${spawns}; i++) await once();
      process.stdout.write(String((cpu() - before) / ${spawns}));
    })();`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.once('exit', (code) =>
      code === 0 ? resolve(Number(out)) : reject(new Error(`floor exited ${code}`)),
    );
  });
}

const f1 = (n: number) => n.toFixed(1);
const f2 = (n: number) => n.toFixed(2);

function report(label: string, count: number, m: Measurement, floor: number): void {
  const total = Object.values(m.cpu).reduce((a, b) => a + b, 0);
  const per = total / m.commands;
  const parts = Object.entries(m.cpu)
    .filter(([, ms]) => ms > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([g, ms]) => `${g} ${f2(ms / m.commands)}`)
    .join(', ');
  const redisTotal = Object.values(m.redisCommands).reduce((a, b) => a + b, 0);
  const topRedis = Object.entries(m.redisCommands)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 12)
    .map(([c, n]) => `${c} ${f2(n / m.commands)}`)
    .join(', ');
  console.log(
    `${label} ${String(count).padStart(2)} sandboxes: ${f1(m.commands / m.seconds)} exec/s, p50 ${f2(m.p50)} ms, p99 ${f2(m.p99)} ms; ` +
      `CPU ${f2(per)} ms/exec = ${f2(per / floor)}x the floor (${parts})`,
  );
  console.log(`   Redis: ${f2(redisTotal / m.commands)} commands/exec (${topRedis})`);
}

async function main(): Promise<void> {
  const roots = [{ label: 'this', root: repoRoot.replace(/\/$/, '') }];
  if (BASELINE_ROOT) roots.push({ label: 'base', root: BASELINE_ROOT.replace(/\/$/, '') });
  const floors: number[] = [];
  const results = new Map<string, Measurement[]>();
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order, so drift in the machine's load hits both builds alike.
    const order = round % 2 === 0 ? roots : [...roots].reverse();
    for (const { label, root } of order) {
      floors.push(await nodeSpawnFloor(1000));
      console.log(`floor: Node spawning true, ${f2(floors.at(-1)!)} ms CPU per spawn (children included)`);
      const profile = PROFILE_DIR !== undefined && label === 'this';
      const stack = await startStack(root, profile);
      try {
        for (const count of LEVELS) {
          const m = await measure(stack, count, profile);
          report(label, count, m, floors.at(-1)!);
          const key = `${label} ${count}`;
          results.set(key, [...(results.get(key) ?? []), m]);
        }
      } finally {
        await stack.stop();
      }
    }
  }
  const floor = floors.reduce((a, b) => a + b, 0) / floors.length;
  console.log(
    `\nsummary over ${ROUNDS} rounds; floor ${f2(floor)} ms CPU per spawn (mean of ${floors.length})`,
  );
  for (const count of LEVELS) {
    for (const { label } of roots) {
      const ms = results.get(`${label} ${count}`) ?? [];
      const commands = ms.reduce((a, m) => a + m.commands, 0);
      const seconds = ms.reduce((a, m) => a + m.seconds, 0);
      const cpu = ms.reduce((a, m) => a + Object.values(m.cpu).reduce((x, y) => x + y, 0), 0);
      console.log(
        `  ${label} ${String(count).padStart(2)}: ${f1(commands / seconds)} exec/s, ` +
          `p50 ${ms.map((m) => f2(m.p50)).join('/')} ms, p99 ${ms.map((m) => f2(m.p99)).join('/')} ms, ` +
          `CPU ${f2(cpu / commands)} ms/exec (${f2(cpu / commands / floor)}x the floor)`,
      );
    }
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
