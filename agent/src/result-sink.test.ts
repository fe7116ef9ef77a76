import { RedisServer } from '@sandstream/test-support';
import { resultKey, sandboxKeys } from '@sandstream/wire';
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
    const keys = sandboxKeys('job-1', 'tagged');
    const sink = new ResultSink({
      redis,
      keys,
      jobId: 'job-1',
      notifyStream: 'rs:notify',
      notifyStreamMaxLength: 100,
      log: createLogger({ verbose: false, write: () => {} }),
    });
    // Under the services (a notify stream is set) the result goes to its step's own key. The
    // leading command records whether that key existed when it ran: 0 means it came first.
    const key = resultKey(keys, 's-1');
    await sink.deliver(result, (pipeline) => {
      pipeline.eval("redis.call('SET', KEYS[2], redis.call('EXISTS', KEYS[1]))", 2, key, 'rs:seen');
    });
    expect(await redis.get('rs:seen')).toBe('0');
    expect(JSON.parse((await redis.get(key)) as string)).toMatchObject({ stepId: 's-1' });
    // It expires: a result nobody takes does not stay.
    expect(await redis.ttl(key)).toBeGreaterThan(3600);
    expect(await redis.llen(keys.results)).toBe(0);
    expect(await redis.xlen('rs:notify')).toBe(1);
  });

  it('delivers the result when the leading command fails, and logs that failure', async () => {
    const lines: string[] = [];
    // Standalone (no notify stream): LPUSHed to the results list, as seed 000 reads it.
    const keys = sandboxKeys('job-2', 'tagged');
    const sink = new ResultSink({
      redis,
      keys,
      jobId: 'job-1',
      notifyStreamMaxLength: 100,
      log: createLogger({ verbose: false, write: (l) => lines.push(l) }),
    });
    await redis.set('rs:not-a-stream', 'x');
    await sink.deliver(result, (pipeline) => {
      pipeline.xadd('rs:not-a-stream', '*', 'event', '{}');
    });
    expect(await redis.llen(keys.results)).toBe(1);
    expect(lines.join('')).toContain('WRONGTYPE');
  });
});
