import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { pollUntil } from '@sandstream/test-support';
import type { RunStep } from '@sandstream/wire';
import { createLogger } from '../src/logger.js';
import { SpawnerLauncher } from '../src/process/spawner-launcher.js';
import { createStepExecutor } from '../src/steps/execute-step.js';
import {
  builtSpawnerPath,
  deleteKeys,
  popResult,
  pushStep,
  startAgent,
  stopAgent,
  testClient,
} from '../src/testing/agent-harness.js';
import { ms, summarize } from './stats.js';

export interface RoundTripReport {
  iterations: number;
  agent: { p50: number; p99: number };
  spawn: { p50: number; p99: number };
  executor: { p50: number; p99: number };
  relay: { p50: number; p99: number };
  inside: { p50: number; p99: number };
  overheadP50Ms: number;
}

function spawnTrue(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('true', [], { stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', () => resolve());
  });
}

/**
 * (1) A `true` step through Redis: LPUSH the step, BRPOP its result, against the floor of
 * spawning `true` directly from Node. The difference at p50 is what the agent adds.
 */
export async function benchRoundTrip(iterations = 300, warmup = 30): Promise<RoundTripReport> {
  const redis = testClient();
  const agent = startAgent({ jobId: `bench-rt-${process.pid}-${Date.now()}` });
  // A second agent timed in the same loop, under the same load: by default the same build with
  // `--spawner none` (run steps forked by Node's child_process instead of the native spawner);
  // SANDSTREAM_AGENT_COMPARE_MAIN=<another build's main.js> compares against that build instead.
  const compareMain = process.env.SANDSTREAM_AGENT_COMPARE_MAIN;
  const compareLabel = compareMain ?? 'same build, --spawner none';
  const other = startAgent({
    jobId: `bench-rt-cmp-${process.pid}-${Date.now()}`,
    ...(compareMain ? { command: [process.execPath, compareMain] } : { extraArgs: ['--spawner', 'none'] }),
  });
  const otherSamples: number[] = [];
  const spawner = new SpawnerLauncher(builtSpawnerPath(), createLogger({ verbose: false, write: () => {} }));
  try {
    for (const a of [agent, other]) {
      await pollUntil(
        'agent heartbeat',
        async () => ((await redis.exists(a.keys.heartbeat)) ? true : undefined),
        {
          intervalMs: 20,
        },
      );
    }
    const agentSamples: number[] = [];
    const spawnSamples: number[] = [];
    const executorSamples: number[] = [];
    const relaySamples: number[] = [];
    const insideSamples: number[] = [];
    // The Redis floor: a relay that BRPOPs a list and LPUSHes what it got to another, i.e. the
    // same hops as a step minus the agent and the child process.
    const relay = testClient();
    const relayIn = `${agent.keys.prefix}bench-relay-in`;
    const relayOut = `${agent.keys.prefix}bench-relay-out`;
    let relaying = true;
    const relayLoop = (async () => {
      while (relaying) {
        const got = await relay.brpop(relayIn, 1);
        if (got) await relay.lpush(relayOut, got[1]);
      }
    })();
    const ctx = { onLine: () => {}, signal: new AbortController().signal, baseDirectory: process.cwd() };
    // The in-process executor starts `true` the way the agent does, through the native spawner,
    // so that "inside the agent - executor" compares like with like.
    spawner.start();
    const executeStep = createStepExecutor({ launcher: spawner });
    const trueStep: RunStep = {
      schemaVersion: 1,
      stepId: 'x',
      kind: 'run',
      command: 'true',
      args: [],
      parallel: false,
      shell: false,
      timeoutSeconds: 10,
    };
    for (let i = 0; i < warmup + iterations; i++) {
      // Interleaved, so both see the same machine load.
      let t = performance.now();
      await pushStep(redis, agent.keys, { schemaVersion: 1, stepId: `rt-${i}`, command: 'true' });
      const result = await popResult(redis, agent.keys);
      const agentMs = performance.now() - t;
      const insideMs = result.durationSeconds * 1000;
      if (result.exitCode !== 0) throw new Error(`step rt-${i} failed: ${JSON.stringify(result)}`);
      t = performance.now();
      await spawnTrue();
      const spawnMs = performance.now() - t;
      t = performance.now();
      await redis.lpush(relayIn, 'x');
      await redis.brpop(relayOut, 5);
      const relayMs = performance.now() - t;
      t = performance.now();
      await pushStep(redis, other.keys, { schemaVersion: 1, stepId: `rt-${i}`, command: 'true' });
      await popResult(redis, other.keys);
      if (i >= warmup) otherSamples.push(performance.now() - t);
      t = performance.now();
      await executeStep(trueStep, ctx);
      const executorMs = performance.now() - t;
      if (i >= warmup) {
        agentSamples.push(agentMs);
        spawnSamples.push(spawnMs);
        executorSamples.push(executorMs);
        relaySamples.push(relayMs);
        insideSamples.push(insideMs);
      }
    }
    relaying = false;
    await relayLoop;
    relay.disconnect();
    await redis.del(relayIn, relayOut);
    const a = summarize(agentSamples);
    const s = summarize(spawnSamples);
    const e = summarize(executorSamples);
    const r = summarize(relaySamples);
    const inside = summarize(insideSamples);
    const report = {
      iterations,
      agent: { p50: a.p50, p99: a.p99 },
      spawn: { p50: s.p50, p99: s.p99 },
      executor: { p50: e.p50, p99: e.p99 },
      relay: { p50: r.p50, p99: r.p99 },
      inside: { p50: inside.p50, p99: inside.p99 },
      overheadP50Ms: a.p50 - s.p50,
    };
    console.log(
      '\n(1) round trip of a `true` step (LPUSH -> result via BRPOP) vs child_process.spawn("true")',
    );
    console.log(`    agent  p50 ${ms(a.p50)}  p99 ${ms(a.p99)}   (${iterations} steps)`);
    console.log(`    spawn  p50 ${ms(s.p50)}  p99 ${ms(s.p99)}`);
    console.log(
      `    executeStep in-process through the spawner (no Redis) p50 ${ms(e.p50)}  p99 ${ms(e.p99)}`,
    );
    console.log(
      `    inside the agent (StepResult.durationSeconds: pop -> result built) p50 ${ms(inside.p50)}  p99 ${ms(inside.p99)}`,
    );
    console.log(
      `    Redis relay floor (LPUSH -> BRPOP -> LPUSH -> BRPOP) p50 ${ms(r.p50)}  p99 ${ms(r.p99)}`,
    );
    console.log(
      `    overhead at p50 ${ms(report.overheadP50Ms)} (goal <= 1 ms); ratio agent/spawn p50 ${(a.p50 / s.p50).toFixed(2)}x`,
    );
    const o = summarize(otherSamples);
    console.log(
      `    comparison agent (${compareLabel}) p50 ${ms(o.p50)}  p99 ${ms(o.p99)}; overhead at p50 ${ms(o.p50 - s.p50)}`,
    );
    console.log(
      `    split at p50: executor over spawn ${ms(e.p50 - s.p50)}; in the agent around the executor (inside - executeStep) ${ms(inside.p50 - e.p50)}; Redis hops and wake-ups (agent - inside) ${ms(a.p50 - inside.p50)}, of which the relay floor ${ms(r.p50)}`,
    );
    return report;
  } finally {
    spawner.close();
    await stopAgent(other);
    await deleteKeys(redis, other.keys);
    await stopAgent(agent);
    await deleteKeys(redis, agent.keys);
    redis.disconnect();
  }
}
