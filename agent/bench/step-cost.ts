import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { pollUntil, RedisServer } from '@sandstream/test-support';
import type { StepInput } from '@sandstream/wire';
import type { Redis } from 'ioredis';
import {
  childPids,
  popResult,
  pushStep,
  startAgent,
  stopAgent,
  testClient,
} from '../src/testing/agent-harness.js';

/**
 * Load-independent costs of one `true` step, next to the same numbers for a bare Node process
 * that only spawns `true`: CPU time, voluntary context switches (each one is the process going
 * to sleep and waiting to be woken, i.e. to be scheduled again, which is what costs wall time
 * on a busy machine), and the Redis commands the agent sends (counted with MONITOR on a private
 * redis-server, so nobody else's traffic is counted).
 */
export interface ProcessCost {
  cpuMsPerStep: number;
  voluntarySwitchesPerStep: number;
}

export interface StepCostReport {
  steps: number;
  agent: ProcessCost;
  bareSpawn: ProcessCost;
  /** The agent's commands per step, by command and key role. */
  agentCommandsPerStep: Record<string, number>;
}

const CLOCK_TICKS_PER_S = 100;

/** utime + stime of the whole process, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_S;
}

/** Voluntary context switches summed over the process's threads. */
function voluntarySwitches(pid: number): number {
  let total = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const match = /^voluntary_ctxt_switches:\s+(\d+)/m.exec(
      readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8'),
    );
    total += Number(match?.[1] ?? 0);
  }
  return total;
}

/** The baseline: a Node process that spawns `true` n times, one after another, and reports its own cost. */
function bareSpawnCost(n: number): Promise<ProcessCost> {
  const script = `
    const { spawn } = require('node:child_process');
    const once = () => new Promise((r) => spawn('true', [], { stdio: 'ignore' }).once('exit', r));
    (async () => {
      for (let i = 0; i < 20; i++) await once();
      const before = process.resourceUsage();
      for (let i = 0; i < ${n}; i++) await once();
      const after = process.resourceUsage();
      process.stdout.write(JSON.stringify({
        cpuMs: (after.userCPUTime + after.systemCPUTime - before.userCPUTime - before.systemCPUTime) / 1000,
        switches: after.voluntaryContextSwitches - before.voluntaryContextSwitches,
      }));
    })();`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
    });
    child.once('error', reject);
    child.once('exit', () => {
      const { cpuMs: cpu, switches } = JSON.parse(out) as { cpuMs: number; switches: number };
      resolve({ cpuMsPerStep: cpu / n, voluntarySwitchesPerStep: switches / n });
    });
  });
}

/**
 * `step` is what each iteration runs: `true` by default; a readFile of a tiny file measures the
 * agent's own machinery (pop, decode, events, result) without a child process.
 */
export async function benchStepCost(
  steps = 200,
  warmup = 20,
  step: Record<string, unknown> = { command: 'true' },
): Promise<StepCostReport> {
  const server = await RedisServer.start();
  const redis = testClient(server.url);
  const monitor = testClient(server.url);
  const agent = startAgent({ redisUrl: server.url, jobId: `bench-cost-${process.pid}` });
  const pid = agent.child.pid as number;
  const counts = new Map<string, number>();
  let counting = false;
  try {
    await pollUntil(
      'agent heartbeat',
      async () => ((await redis.exists(agent.keys.heartbeat)) ? true : undefined),
      { intervalMs: 20 },
    );
    const role = (key: string | undefined) =>
      key === agent.keys.in
        ? ':in'
        : key === agent.keys.results
          ? ':results'
          : key === agent.keys.events
            ? ':events'
            : key === agent.keys.control
              ? ':control'
              : key === agent.keys.heartbeat
                ? ':heartbeat'
                : 'other';
    const watcher = (await monitor.monitor()) as unknown as Redis;
    watcher.on('monitor', (_time: string, args: string[]) => {
      if (!counting) return;
      const [name, key] = [String(args[0]).toUpperCase(), args[1]];
      // The bench's own traffic: it LPUSHes steps and BRPOPs results.
      if ((name === 'LPUSH' && key === agent.keys.in) || (name === 'BRPOP' && key === agent.keys.results))
        return;
      const label = `${name} ${role(key)}`;
      counts.set(label, (counts.get(label) ?? 0) + 1);
    });
    const one = async (i: number) => {
      await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: `cost-${i}`, ...step } as StepInput);
      const result = await popResult(redis, agent.keys);
      if (result.errorCode || (step.command && result.exitCode !== 0))
        throw new Error(`step cost-${i} failed: ${JSON.stringify(result)}`);
    };
    for (let i = 0; i < warmup; i++) await one(i);
    // Let the last warm-up step's trailing replies settle before counting.
    await new Promise((r) => setTimeout(r, 200));
    counting = true;
    // The agent and its long-lived children (the native spawner, which does the agent's
    // process starting when it runs): its work is the agent's work.
    const pids = [pid, ...childPids(pid)];
    const sum = (measure: (p: number) => number) => pids.reduce((total, p) => total + measure(p), 0);
    const cpuBefore = sum(cpuMs);
    const switchesBefore = sum(voluntarySwitches);
    for (let i = 0; i < steps; i++) await one(warmup + i);
    const agentCost: ProcessCost = {
      cpuMsPerStep: (sum(cpuMs) - cpuBefore) / steps,
      voluntarySwitchesPerStep: (sum(voluntarySwitches) - switchesBefore) / steps,
    };
    await new Promise((r) => setTimeout(r, 200));
    counting = false;
    const bare = await bareSpawnCost(steps);
    const perStep: Record<string, number> = {};
    for (const [label, n] of [...counts].sort()) perStep[label] = n / steps;
    console.log(`\n(1b) cost per step ${JSON.stringify(step)}, ${steps} steps (load-independent measures)`);
    console.log(
      `    agent process (with its ${pids.length - 1} helper process${pids.length === 2 ? '' : 'es'}): CPU ${agentCost.cpuMsPerStep.toFixed(2)} ms, voluntary context switches ${agentCost.voluntarySwitchesPerStep.toFixed(1)}`,
    );
    console.log(
      `    baseline, node spawning true: CPU ${bare.cpuMsPerStep.toFixed(2)} ms, voluntary context switches ${bare.voluntarySwitchesPerStep.toFixed(1)}`,
    );
    console.log(
      `    agent's Redis commands per step (heartbeat SETs are timer-driven): ${Object.entries(perStep)
        .map(([k, v]) => `${k} ${v.toFixed(2)}`)
        .join(', ')}`,
    );
    watcher.disconnect();
    return { steps, agent: agentCost, bareSpawn: bare, agentCommandsPerStep: perStep };
  } finally {
    await stopAgent(agent);
    redis.disconnect();
    monitor.disconnect();
    await server.stop();
  }
}
