import { performance } from 'node:perf_hooks';
import { pollUntil } from '@sandstream/test-support';
import { encodeEvent, StreamLimits } from '@sandstream/wire';
import { deleteKeys, pushStep, startAgent, stopAgent, testClient } from '../src/testing/agent-harness.js';
import { follow } from './follower.js';

export interface ThroughputReport {
  lines: number;
  agentLinesPerSecond: number;
  agentSeqPerSecond: number;
  agentDropped: number;
  rawLinesPerSecond: number;
  ratio: number;
}

/**
 * (2) `seq 1 N` through the agent to a follower reading the stream, against the ceiling: the
 * same N events XADDed by ioredis itself in pipelines of 1,000 (what the agent does, minus the
 * child process and the agent), read by the same follower, in the same run.
 */
export async function benchThroughput(n = 1_000_000): Promise<ThroughputReport> {
  const redis = testClient();
  const reader = testClient();
  const tag = `${process.pid}-${Date.now()}`;

  // Raw ceiling first.
  const rawKey = `bench-raw-${tag}`;
  const timestamp = new Date().toISOString();
  let raw: Awaited<ReturnType<typeof follow>>;
  {
    const started = performance.now();
    const following = follow(reader, rawKey, started, { expectLines: n, idleMs: 2000 });
    for (let i = 1; i <= n; i += 1000) {
      const pipeline = redis.pipeline();
      for (let j = i; j < i + 1000 && j <= n; j++) {
        const [field, json] = encodeEvent({
          schemaVersion: 1,
          stepId: 'raw',
          kind: 'stdout',
          seq: j,
          line: String(j),
          timestamp,
        });
        pipeline.xadd(rawKey, 'MAXLEN', '~', StreamLimits.eventStreamMaxLength, '*', field, json);
      }
      await pipeline.exec();
    }
    raw = await following;
    await redis.del(rawKey);
  }
  const rawRate = (raw.lines / raw.elapsedMs) * 1000;

  const report = await throughAgent(n, `bench-tp-${tag}`, rawRate, raw, 'agent', []);
  // The same build with run steps forked by Node instead of the native spawner, for comparison.
  if (process.env.SANDSTREAM_BENCH_COMPARE_SPAWNER !== '0')
    await throughAgent(n, `bench-tp-none-${tag}`, rawRate, null, 'agent --spawner none', [
      '--spawner',
      'none',
    ]);
  redis.disconnect();
  reader.disconnect();
  return report;
}

async function throughAgent(
  n: number,
  jobId: string,
  rawRate: number,
  raw: Awaited<ReturnType<typeof follow>> | null,
  label: string,
  extraArgs: string[],
): Promise<ThroughputReport> {
  const redis = testClient();
  const reader = testClient();
  const agent = startAgent({ jobId, extraArgs });
  try {
    await pollUntil(
      'agent heartbeat',
      async () => ((await redis.exists(agent.keys.heartbeat)) ? true : undefined),
      { intervalMs: 20 },
    );
    const started = performance.now();
    const following = follow(reader, agent.keys.events, started, { idleMs: 30_000 });
    await pushStep(redis, agent.keys, {
      schemaVersion: 1,
      stepId: 'seq',
      command: 'seq',
      args: ['1', String(n)],
    });
    const seen = await following;
    const agentRate = (seen.lines / seen.elapsedMs) * 1000;
    const seqRate = (seen.lastSeq / seen.elapsedMs) * 1000;
    const report = {
      lines: n,
      agentLinesPerSecond: agentRate,
      agentSeqPerSecond: seqRate,
      agentDropped: seen.droppedLines ?? -1,
      rawLinesPerSecond: rawRate,
      ratio: agentRate / rawRate,
    };
    const k = (x: number) => `${Math.round(x).toLocaleString('en-US')}/s`;
    if (raw) {
      console.log(
        `\n(2) seq 1 ${n} -> agent -> stream -> follower (XREAD) vs raw pipelined XADD of the same events`,
      );
      console.log(
        `    raw ioredis XADD ceiling: ${k(rawRate)} (${raw.lines.toLocaleString('en-US')} lines received in ${Math.round(raw.elapsedMs)} ms)`,
      );
    }
    console.log(
      `    ${label}: ${k(agentRate)} delivered (${seen.lines.toLocaleString('en-US')} lines in ${Math.round(seen.elapsedMs)} ms, ${report.agentDropped.toLocaleString('en-US')} dropped by the agent's bound); step covered at ${k(seqRate)}`,
    );
    console.log(`    ratio delivered/raw ${report.ratio.toFixed(2)}x (goal >= 0.5x)`);
    return report;
  } finally {
    await stopAgent(agent);
    await deleteKeys(redis, agent.keys);
    redis.disconnect();
    reader.disconnect();
  }
}
