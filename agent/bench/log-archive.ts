import { performance } from 'node:perf_hooks';
import { pollUntil } from '@sandstream/test-support';
import {
  deleteKeys,
  pushStep,
  startAgent,
  stopAgent,
  testClient,
  uniqueJobId,
} from '../src/testing/agent-harness.js';
import { archivingReader } from '../src/testing/archiving-reader.js';

export interface LogArchiveRun {
  archive: boolean;
  /** Lines the step printed per second: `seq 1 N` from LPUSH to its `completed` event. */
  linesPerSecond: number;
  /** Lines that reached the stream (and the reader). */
  delivered: number;
  /** delivered / the same elapsed time. */
  deliveredPerSecond: number;
  dropped: number;
  /** Largest XLEN sampled during the step. */
  maxStreamLength: number;
}

/**
 * (4) `seq 1 N` with --log-archive against without, in the same run (alternating, `rounds`
 * each): the step's lines/s from its start to its `completed` event, read by a stand-in for the
 * archiver that XTRIMs MINID after each batch it read, as the real one does once NATS acked.
 * Off, the step runs at full speed and the agent drops what its buffer cannot hold; on, it is
 * slowed to what Redis and the reader take, and drops nothing.
 */
export async function benchLogArchive(n = 1_000_000, rounds = 2): Promise<LogArchiveRun[]> {
  const runs: LogArchiveRun[] = [];
  console.log(`\n(4) seq 1 ${n}: --log-archive (trimming reader as archiver) vs off, ${rounds} rounds each`);
  for (let round = 0; round < rounds; round++) {
    for (const archive of [false, true]) {
      const run = await oneRun(n, archive);
      runs.push(run);
      const k = (x: number) => Math.round(x).toLocaleString('en-US');
      console.log(
        `    ${archive ? 'archive on ' : 'archive off'}: step ${k(run.linesPerSecond)} lines/s, delivered ${k(run.deliveredPerSecond)} lines/s (${k(run.delivered)} lines, ${k(run.dropped)} dropped), max XLEN ${k(run.maxStreamLength)}`,
      );
    }
  }
  const mean = (archive: boolean, of: (run: LogArchiveRun) => number) => {
    const these = runs.filter((r) => r.archive === archive);
    return these.reduce((sum, r) => sum + of(r), 0) / these.length;
  };
  const step = (r: LogArchiveRun) => r.linesPerSecond;
  const delivered = (r: LogArchiveRun) => r.deliveredPerSecond;
  // Off, the step's rate is mostly lines it dropped: the delivered rate is the like-for-like one.
  console.log(
    `    ratio on/off: step lines/s ${(mean(true, step) / mean(false, step)).toFixed(2)}x, delivered lines/s ${(mean(true, delivered) / mean(false, delivered)).toFixed(2)}x (goal >= 0.5x)`,
  );
  return runs;
}

async function oneRun(n: number, archive: boolean): Promise<LogArchiveRun> {
  const redis = testClient();
  const reader = testClient();
  const agent = startAgent({
    jobId: uniqueJobId('bench-archive'),
    extraArgs: archive ? ['--log-archive'] : [],
  });
  try {
    await pollUntil(
      'agent heartbeat',
      async () => ((await redis.exists(agent.keys.heartbeat)) ? true : undefined),
      { intervalMs: 20 },
    );
    let maxStreamLength = 0;
    const sampler = setInterval(() => {
      void redis.xlen(agent.keys.events).then((length) => {
        maxStreamLength = Math.max(maxStreamLength, length);
      });
    }, 50);
    const started = performance.now();
    const reading = archivingReader(reader, agent.keys.events, { stepId: 'seq', idleMs: 60_000 });
    await pushStep(redis, agent.keys, {
      schemaVersion: 1,
      stepId: 'seq',
      command: 'seq',
      args: ['1', String(n)],
      timeoutSeconds: 600,
    });
    const read = await reading;
    const elapsedMs = performance.now() - started;
    clearInterval(sampler);
    if (!read.completed) throw new Error('the step did not complete');
    return {
      archive,
      linesPerSecond: (n / elapsedMs) * 1000,
      delivered: read.lines,
      deliveredPerSecond: (read.lines / elapsedMs) * 1000,
      dropped: read.completed.droppedLines ?? 0,
      maxStreamLength,
    };
  } finally {
    await stopAgent(agent);
    await deleteKeys(redis, agent.keys);
    redis.disconnect();
    reader.disconnect();
  }
}
