import { RedisServer } from '@sandstream/test-support';
import type { StepEvent } from '@sandstream/wire';
import { describe, expect, it, vi } from 'vitest';
import {
  deleteKeys,
  POLL,
  popResult,
  pushStep,
  startAgent,
  stopAgent,
  testClient,
  uniqueJobId,
} from './testing/agent-harness.js';
import { archivingReader } from './testing/archiving-reader.js';
import { useTestRedis } from './testing/test-redis.js';

/**
 * The agent with --log-archive: the events stream stays below the high water mark by slowing
 * the step down, never by dropping, and every line reaches whoever archives the stream.
 */
const { redis, cleanups } = useTestRedis();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the agent with the log archive on', () => {
  it('holds a 100,000-line step at the high water mark until the stream is trimmed, then delivers every line once, in order', async () => {
    const highWater = 500;
    const agent = startAgent({
      jobId: uniqueJobId('archive'),
      extraArgs: ['--log-archive', '--log-archive-high-water', String(highWater)],
    });
    cleanups.push(
      () => deleteKeys(redis, agent.keys),
      () => stopAgent(agent),
    );
    await vi.waitUntil(async () => ((await redis.exists(agent.keys.heartbeat)) ? true : undefined), POLL);
    await pushStep(redis, agent.keys, {
      schemaVersion: 1,
      stepId: 'seq',
      command: 'seq',
      args: ['1', '100000'],
      timeoutSeconds: 120,
    });

    // Nobody trims: the stream fills to the mark and stays there; the step waits, drops nothing.
    let maxLength = 0;
    const sample = async () => {
      maxLength = Math.max(maxLength, await redis.xlen(agent.keys.events));
    };
    await vi.waitUntil(
      async () => ((await redis.xlen(agent.keys.events)) >= highWater ? true : undefined),
      POLL,
    );
    // Sampled over a while on purpose: what is tested is that the length stays at the mark.
    for (let i = 0; i < 30; i++) {
      await sample();
      await sleep(50);
    }
    expect(maxLength).toBeGreaterThanOrEqual(highWater);
    // The mark plus the step's `started` event; never the thousands a free-running step writes.
    expect(maxLength).toBeLessThanOrEqual(highWater + 1);
    expect(await redis.llen(agent.keys.results)).toBe(0);

    // The archiver's stand-in reads and trims: the step goes on, and all of it arrives.
    const sampler = setInterval(() => void sample(), 20);
    let expectedSeq = 0;
    const outOfOrder: StepEvent[] = [];
    const read = await archivingReader(redis, agent.keys.events, {
      stepId: 'seq',
      idleMs: 20_000,
      onEvent: (event) => {
        if (event.seq !== expectedSeq) outOfOrder.push(event);
        expectedSeq = event.seq + 1;
        if (event.kind === 'stdout' && event.line !== String(event.seq)) outOfOrder.push(event);
      },
    });
    clearInterval(sampler);
    expect(outOfOrder.slice(0, 3)).toEqual([]);
    expect(read.lines).toBe(100_000);
    expect(read.completed).toMatchObject({ kind: 'completed', seq: 100_001, exitCode: 0, droppedLines: 0 });
    expect(maxLength).toBeLessThanOrEqual(highWater + 2);
    const result = await popResult(redis, agent.keys);
    expect(result).toMatchObject({ stepId: 'seq', exitCode: 0, droppedLines: 0, outputLines: 100_000 });
  }, 120_000);

  it('falls back to dropping and counting while Redis is unreachable, instead of holding the step', async () => {
    // A private Redis that the test can stop and start again.
    const server = await RedisServer.start();
    cleanups.push(() => server.stop());
    const own = testClient(server.url);
    own.on('error', () => {});
    cleanups.push(async () => own.disconnect());
    const agent = startAgent({
      redisUrl: server.url,
      jobId: uniqueJobId('archive-down'),
      extraArgs: ['--log-archive', '--log-archive-high-water', '500', '--event-buffer-lines', '1000'],
    });
    cleanups.push(() => stopAgent(agent));
    await vi.waitUntil(async () => ((await own.exists(agent.keys.heartbeat)) ? true : undefined), POLL);
    // Prints a little, long enough for Redis to go away, then a lot.
    await pushStep(own, agent.keys, {
      schemaVersion: 1,
      stepId: 'chatty',
      command: 'sh',
      args: ['-c', 'seq 1 10; sleep 1; seq 11 50000'],
      timeoutSeconds: 60,
    });
    await vi.waitUntil(async () => ((await own.xlen(agent.keys.events)) >= 11 ? true : undefined), POLL);
    await server.kill();
    // Longer than the step: without the fallback the step would be held until Redis is back.
    await sleep(4000);
    await server.start();
    const result = await popResult(own, agent.keys, 30);
    expect(result).toMatchObject({ stepId: 'chatty', exitCode: 0, outputLines: 50_000 });
    expect(result.droppedLines).toBeGreaterThan(0);
    expect(result.durationSeconds).toBeLessThan(3);
  }, 60_000);
});
