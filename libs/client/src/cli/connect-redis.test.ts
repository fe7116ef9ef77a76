import { freePort, testRedisUrl } from '@sandstream/test-support';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { connectCliRedis, RedisUnreachableError } from './connect-redis.js';

afterEach(() => vi.restoreAllMocks());

describe('connectCliRedis', () => {
  it('gives up on a port nothing listens on after its few attempts, with one error and no ioredis noise', async () => {
    const printed = vi.spyOn(console, 'error');
    const port = await freePort();
    const started = Date.now();
    // A long connect timeout: giving up must come from the refused attempts, not from the timer.
    const error = await connectCliRedis(`redis://admin:pw@127.0.0.1:${port}`, { timeoutMs: 30_000 }).catch(
      (e: unknown) => e,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(error).toBeInstanceOf(RedisUnreachableError);
    expect((error as Error).message).toBe(
      `cannot reach Redis at redis://admin:***@127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`,
    );
    // ioredis reports an error event nobody listens to with console.error ("Unhandled error event").
    // The refusal rejected on the client's 'end' (no more reconnects), after which ioredis emits
    // nothing: one turn of the event loop lets anything already queued land.
    await new Promise((r) => setImmediate(r));
    expect(printed).not.toHaveBeenCalled();
  });

  it('names the file a URL came from', async () => {
    const port = await freePort();
    await expect(
      connectCliRedis(`redis://127.0.0.1:${port}`, { source: '/repo/.cache/sandstream/local.json' }),
    ).rejects.toThrow(
      `cannot reach Redis at redis://127.0.0.1:${port} (from /repo/.cache/sandstream/local.json): connect`,
    );
  });

  it('connects to a Redis that answers', async () => {
    const { redis } = await connectCliRedis(testRedisUrl());
    expect(await redis.ping()).toBe('PONG');
    redis.disconnect();
  });
});
