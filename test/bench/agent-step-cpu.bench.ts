/**
 * The agent alone, per `exec(['true'])`-like step: its CPU, its spawner's (the `true`s it reaped
 * included) and how often each went to sleep and was woken (voluntary context switches), for
 * this build and a baseline build given as a second repository root, interleaved. No services:
 * a step (a `parallel` run step, as a live sandbox's commands are) is LPUSHed by hand and its
 * result popped before the next, after a warm-up as short as test/bench/exec-cpu.bench.ts's, so
 * an agent's first few hundred commands (V8 still tiering its code up) are what is measured.
 * exec-cpu.bench.ts measures the whole system; this one says what of it is the agent's.
 *
 *   npm run build
 *   npx vite-node test/bench/agent-step-cpu.bench.ts [steps=300] [rounds=4] [baseline root] [warm-up=30] [command=true]
 *
 * `command` (split at spaces) replaces `true` in the measured steps, e.g. `seq 1 200000` for
 * a step whose output the agent ships; the warm-up steps stay `true`.
 *
 * Shared Redis (REDIS_URL or 127.0.0.1:6379), unique keys, deleted afterwards.
 */
import { readFileSync } from 'node:fs';
import { childPids, repoRoot } from '@sandstream/test-support';
import {
  deleteKeys,
  popResult,
  pushStep,
  startAgent,
  stopAgent,
  testClient,
  uniqueJobId,
} from '../../agent/src/testing/agent-harness.js';

const STEPS = Number(process.argv[2] ?? 300);
const ROUNDS = Number(process.argv[3] ?? 4);
const BASELINE_ROOT = process.argv[4];
const WARM_UP = Number(process.argv[5] ?? 30);
const [COMMAND = 'true', ...ARGS] = (process.argv[6] ?? 'true').split(' ');
const TICK_MS = 10;

/** utime + stime + cutime + cstime, in ms. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_MS;
}

function wakeUps(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
}

interface Round {
  agentMs: number;
  spawnerMs: number;
  agentWakeUps: number;
  spawnerWakeUps: number;
  p50: number;
}

async function measure(root: string): Promise<Round> {
  const redis = testClient();
  const agent = startAgent({
    jobId: uniqueJobId('step-cpu'),
    command: [process.execPath, `${root}/agent/dist/main.js`],
  });
  try {
    const step = (i: number) =>
      i < WARM_UP
        ? { schemaVersion: 1, stepId: `s${i}`, command: 'true', parallel: true }
        : { schemaVersion: 1, stepId: `s${i}`, command: COMMAND, args: ARGS, parallel: true };
    const run = async (i: number) => {
      await pushStep(redis, agent.keys, step(i));
      await popResult(redis, agent.keys);
    };
    for (let i = 0; i < WARM_UP; i++) await run(i);
    const pid = agent.child.pid as number;
    const spawner = childPids(pid)[0];
    if (spawner === undefined) throw new Error('the agent runs no spawner helper');
    const before = { agent: cpuMs(pid), spawner: cpuMs(spawner), aw: wakeUps(pid), sw: wakeUps(spawner) };
    const latencies: number[] = [];
    for (let i = 0; i < STEPS; i++) {
      const started = performance.now();
      await run(WARM_UP + i);
      latencies.push(performance.now() - started);
    }
    latencies.sort((a, b) => a - b);
    return {
      agentMs: (cpuMs(pid) - before.agent) / STEPS,
      spawnerMs: (cpuMs(spawner) - before.spawner) / STEPS,
      agentWakeUps: (wakeUps(pid) - before.aw) / STEPS,
      spawnerWakeUps: (wakeUps(spawner) - before.sw) / STEPS,
      p50: latencies[latencies.length >> 1] ?? Number.NaN,
    };
  } finally {
    await stopAgent(agent);
    await deleteKeys(redis, agent.keys);
    redis.disconnect();
  }
}

const f2 = (n: number) => n.toFixed(2);
const f3 = (n: number) => n.toFixed(3);

async function main(): Promise<void> {
  const roots = [{ label: 'this', root: repoRoot.replace(/\/$/, '') }];
  if (BASELINE_ROOT) roots.push({ label: 'base', root: BASELINE_ROOT.replace(/\/$/, '') });
  const results = new Map<string, Round[]>();
  for (let round = 0; round < ROUNDS; round++) {
    // Alternate the order, so drift in the machine's load hits both builds alike.
    for (const { label, root } of round % 2 === 0 ? roots : [...roots].reverse()) {
      const r = await measure(root);
      results.set(label, [...(results.get(label) ?? []), r]);
      console.log(
        `${label}: agent ${f3(r.agentMs)} ms/step, spawner + true ${f3(r.spawnerMs)} ms/step; ` +
          `wake-ups per step: agent ${f2(r.agentWakeUps)}, spawner ${f2(r.spawnerWakeUps)}; p50 ${f2(r.p50)} ms`,
      );
    }
  }
  const mean = (rs: Round[], key: keyof Round) => rs.reduce((a, r) => a + r[key], 0) / rs.length;
  console.log(`\nmeans over ${ROUNDS} rounds of ${STEPS} steps (after ${WARM_UP} to warm up):`);
  for (const { label } of roots) {
    const rs = results.get(label) ?? [];
    console.log(
      `  ${label}: agent ${f3(mean(rs, 'agentMs'))} ms/step, spawner + true ${f3(mean(rs, 'spawnerMs'))}; ` +
        `wake-ups agent ${f2(mean(rs, 'agentWakeUps'))}, spawner ${f2(mean(rs, 'spawnerWakeUps'))}; p50 ${f2(mean(rs, 'p50'))} ms`,
    );
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
