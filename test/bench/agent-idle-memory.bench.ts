/**
 * An idle agent's anonymous memory against an idle bare `node`, measured in the same run (issue 32
 * §4: at most the bare node's + 3 MB), with the two figures that must not get worse for it: the
 * peak RSS of a `seq 1 <lines>` step (≤ 80 MB) and the boot against the bare-Node floor (≤ 1.3×).
 *
 * Each round, in this order so the machine's load hits all alike:
 * - bare node: `node -e 'setInterval(() => {}, 1e9)'`, and the same with the agent's V8 flags and
 *   MALLOC_ARENA_MAX=1 (what the agent runs with), 2 s after start;
 * - the floor's boot: a bare node that opens a raw socket and sends one SET (as agent-boot.bench.ts);
 * - the agent as `--inject` wrote it (what every Docker and Kubernetes sandbox runs), started
 *   through its loader with the backends' agent-only environment: its boot to the first heartbeat
 *   SET (time and CPU, agent and spawner helper), its memory once idle (3 s after that heartbeat:
 *   the startup blob is given back right after it), then one `seq 1 <lines>` step and its VmHWM.
 *
 * Anonymous memory is smaps_rollup's Anonymous, summed over the process and its children (the
 * agent's spawner helper; a bare node has none). A private redis-server, keyspace notifications
 * for the heartbeat, nothing polls.
 *
 *   npx tsc -b && npm run build -w @sandstream/agent && npx vite-node test/bench/agent-idle-memory.bench.ts [rounds] [lines]
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  childPids,
  floorArgv,
  peakRssKb,
  percentile,
  repoRoot,
  smapsRollupKb,
} from '@sandstream/test-support';
import { AGENT_ONLY_ENV, sandboxKeys } from '@sandstream/wire';
import { HeartbeatWatch, stopChild as stop } from '../helpers/heartbeat-boot.js';

const ROUNDS = Number(process.argv[2] ?? 5);
const LINES = Number(process.argv[3] ?? 1_000_000);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1 || ROUNDS > 100)
  throw new Error('rounds must be a whole number 1..100');
if (!Number.isInteger(LINES) || LINES < 1 || LINES > 10_000_000)
  throw new Error('lines must be a whole number 1..10,000,000');

/** The goal: idle agent anonymous memory ≤ bare node's + this. */
const GOAL_OVER_BARE_MB = 3;
const GOAL_PEAK_MB = 80;
const GOAL_BOOT_RATIO = 1.3;
/** The agent's V8 flags (agent/src/v8-tuning.ts), given on the command line to the bare node. */
const AGENT_V8_FLAGS = [
  '--optimize-for-size',
  '--max-semi-space-size=1',
  '--semi-space-growth-factor=1',
  '--no-flush-bytecode',
];

const mb = (kb: number) => kb / 1024;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Anonymous kB of a process and its children. */
function anonymousKb(pid: number): number {
  return [pid, ...childPids(pid)].reduce((sum, p) => sum + smapsRollupKb(p, 'Anonymous'), 0);
}

async function bareNodeAnonKb(flags: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const child = spawn(process.execPath, [...flags, '-e', 'setInterval(() => {}, 1e9)'], {
    stdio: 'ignore',
    env,
  });
  try {
    await sleep(2000);
    return anonymousKb(child.pid as number);
  } finally {
    await stop(child);
  }
}

interface Round {
  bareKb: number;
  bareFlagsKb: number;
  floorMs: number;
  floorCpuMs: number;
  agentMs: number;
  agentCpuMs: number;
  agentIdleKb: number;
  agentIdlePrivateDirtyKb: number;
  agentPeakKb: number;
}

async function main(): Promise<void> {
  const watch = await HeartbeatWatch.start();
  const { server, redis } = watch;

  // What a sandbox runs: the copy --inject writes, started from its own lib/.
  const dist = join(repoRoot, 'agent', 'dist');
  const injected = mkdtempSync(join(tmpdir(), 'bench-idle-memory-'));
  const loader = (lib: string) => [join(lib, 'ld-linux-x86-64.so.2'), '--library-path', lib];
  const inject = spawnSync(
    loader(join(dist, 'runtime', 'lib'))[0] as string,
    [...loader(join(dist, 'runtime', 'lib')).slice(1), join(dist, 'sandstream-agent'), '--inject', injected],
    { stdio: 'inherit' },
  );
  if (inject.status !== 0) throw new Error(`--inject ${injected} exited with ${inject.status}`);
  const agentArgv = [...loader(join(injected, 'lib')), join(injected, 'sandstream-agent')];

  async function floorBoot(): Promise<{ ms: number; cpuMs: number }> {
    const key = `sandbox:floor-${randomBytes(6).toString('hex')}:heartbeat`;
    const argv = floorArgv(server.port, key);
    const { child, ms, cpuMs } = await watch.boot(argv, key);
    await stop(child);
    await redis.unlink(key);
    return { ms, cpuMs };
  }

  async function agentRound(): Promise<Omit<Round, 'bareKb' | 'bareFlagsKb' | 'floorMs' | 'floorCpuMs'>> {
    const jobId = `idle-mem-${randomBytes(6).toString('hex')}`;
    const keys = sandboxKeys(jobId);
    const {
      child,
      ms: agentMs,
      cpuMs: agentCpuMs,
      exited,
    } = await watch.boot([...agentArgv, '--redis-url', server.url, '--job-id', jobId], keys.heartbeat, {
      ...process.env,
      ...AGENT_ONLY_ENV,
    });
    const pid = child.pid as number;
    try {
      await Promise.race([sleep(3000), exited]);
      const agentIdleKb = anonymousKb(pid);
      const agentIdlePrivateDirtyKb = [pid, ...childPids(pid)].reduce(
        (sum, p) => sum + smapsRollupKb(p, 'Private_Dirty'),
        0,
      );
      await redis.lpush(
        keys.in,
        JSON.stringify({
          schemaVersion: 1,
          stepId: 'seq',
          kind: 'run',
          command: 'seq',
          args: ['1', String(LINES)],
        }),
      );
      const popped = await Promise.race([redis.brpop(keys.results, 300), exited]);
      if (!popped) throw new Error(`no result for seq 1 ${LINES} within 300 s`);
      const result = JSON.parse(popped[1]) as { exitCode?: number };
      if (result.exitCode !== 0) throw new Error(`seq 1 ${LINES} ended with ${popped[1]}`);
      return { agentMs, agentCpuMs, agentIdleKb, agentIdlePrivateDirtyKb, agentPeakKb: peakRssKb(pid) };
    } finally {
      await stop(child);
      await redis.unlink(keys.heartbeat, keys.in, keys.events, keys.results, keys.control);
    }
  }

  const flagsEnv = { ...process.env, MALLOC_ARENA_MAX: '1' };
  // One untimed round of each boot: every binary in the page cache, as on a busy node.
  await floorBoot();
  const rounds: Round[] = [];
  const loadBefore = loadavg()[0] as number;
  for (let i = 0; i < ROUNDS; i++) {
    const bareKb = await bareNodeAnonKb([], process.env);
    const bareFlagsKb = await bareNodeAnonKb(AGENT_V8_FLAGS, flagsEnv);
    const floor = await floorBoot();
    const agent = await agentRound();
    rounds.push({ bareKb, bareFlagsKb, floorMs: floor.ms, floorCpuMs: floor.cpuMs, ...agent });
  }
  const loadAfter = loadavg()[0] as number;
  await watch.close();
  rmSync(injected, { recursive: true, force: true });

  console.log(
    `\n## idle agent memory against a bare node (${ROUNDS} rounds, seq 1 ${LINES}, load average ${loadBefore.toFixed(1)} -> ${loadAfter.toFixed(1)})`,
  );
  console.log(
    '| round | bare node anon MB | bare node, agent flags, anon MB | agent idle anon MB (Private_Dirty) | agent − bare MB (goal ≤ 3) | peak RSS MB (goal ≤ 80) | boot ×floor, time / CPU (goal ≤ 1.3) |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const [i, r] of rounds.entries()) {
    console.log(
      `| ${i + 1} | ${mb(r.bareKb).toFixed(1)} | ${mb(r.bareFlagsKb).toFixed(1)} | ${mb(r.agentIdleKb).toFixed(1)} (${mb(r.agentIdlePrivateDirtyKb).toFixed(1)}) | ${mb(r.agentIdleKb - r.bareKb).toFixed(1)} | ${mb(r.agentPeakKb).toFixed(1)} | ${(r.agentMs / r.floorMs).toFixed(2)} / ${(r.agentCpuMs / r.floorCpuMs).toFixed(2)} |`,
    );
  }
  const median = (xs: number[]) =>
    percentile(
      [...xs].sort((a, b) => a - b),
      50,
    );
  const over = median(rounds.map((r) => mb(r.agentIdleKb - r.bareKb)));
  const peak = Math.max(...rounds.map((r) => mb(r.agentPeakKb)));
  const bootMs = median(rounds.map((r) => r.agentMs)) / median(rounds.map((r) => r.floorMs));
  const bootCpu = median(rounds.map((r) => r.agentCpuMs)) / median(rounds.map((r) => r.floorCpuMs));
  const verdict = (ok: boolean) => (ok ? 'met' : 'NOT met');
  console.log(
    `\nmedians: bare node ${mb(median(rounds.map((r) => r.bareKb))).toFixed(1)} MB, agent idle ${mb(median(rounds.map((r) => r.agentIdleKb))).toFixed(1)} MB anonymous:` +
      ` +${over.toFixed(1)} MB (goal ≤ +${GOAL_OVER_BARE_MB}: ${verdict(over <= GOAL_OVER_BARE_MB)});` +
      ` highest peak ${peak.toFixed(1)} MB (goal ≤ ${GOAL_PEAK_MB}: ${verdict(peak <= GOAL_PEAK_MB)});` +
      ` boot ${bootMs.toFixed(2)}× time, ${bootCpu.toFixed(2)}× CPU (goal ≤ ${GOAL_BOOT_RATIO}: ${verdict(Math.max(bootMs, bootCpu) <= GOAL_BOOT_RATIO)})`,
  );
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
