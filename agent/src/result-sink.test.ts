import { RedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';
import { ResultSink } from './result-sink.js';

let server: RedisServer;
let redis: Redis;

beforeAll(async () => {
  server = await RedisServer.start();
  redis = new Redis(server.url, { maxRetriesPerRequest: null });
});

afterAll(async () => {
  redis?.disconnect();
  await server?.stop();
});

const result = {
  schemaVersion: 1 as const,
  stepId: 's-1',
  exitCode: 0,
  timedOut: false,
  durationSeconds: 0.01,
  errorMessage: null,
};

describe('ResultSink', () => {
  it('writes the leading command before the result and the notice, in one pipeline', async () => {
    const sink = new ResultSink({
      redis,
      resultsKey: 'rs:results',
      jobId: 'job-1',
      notifyStream: 'rs:notify',
      notifyStreamMaxLength: 100,
      log: createLogger({ verbose: false, write: () => {} }),
    });
    // The leading command records how long the results list was when it ran: 0 means it
    // reached Redis before the LPUSH.
    await sink.deliver(result, (pipeline) => {
      pipeline.eval("redis.call('SET', KEYS[2], redis.call('LLEN', KEYS[1]))", 2, 'rs:results', 'rs:seen');
    });
    expect(await redis.get('rs:seen')).toBe('0');
    expect(JSON.parse((await redis.lindex('rs:results', 0)) as string)).toMatchObject({ stepId: 's-1' });
    expect(await redis.xlen('rs:notify')).toBe(1);
  });

  it('delivers the result when the leading command fails, and logs that failure', async () => {
    const lines: string[] = [];
    const sink = new ResultSink({
      redis,
      resultsKey: 'rs:results-2',
      jobId: 'job-1',
      notifyStreamMaxLength: 100,
      log: createLogger({ verbose: false, write: (l) => lines.push(l) }),
    });
    await redis.set('rs:not-a-stream', 'x');
    await sink.deliver(result, (pipeline) => {
      pipeline.xadd('rs:not-a-stream', '*', 'event', '{}');
    });
    expect(await redis.llen('rs:results-2')).toBe(1);
    expect(lines.join('')).toContain('WRONGTYPE');
  });
});
