import { testRedisUrl, uniqueSuffix } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';

describe("BullMQ's queues on a connection of their own", () => {
  const namespace = `queue-conn-${uniqueSuffix()}`;
  // As the HTTP API holds it: auto-pipelining, where every command defined on the connection is
  // copied onto each pipeline (one per event-loop turn).
  const redis = new Redis(testRedisUrl(), { enableAutoPipelining: true });
  const client = new SandstreamClient({ redis, namespace, onWarning: () => {} });

  afterAll(async () => {
    await client.close();
    redis.disconnect();
  });

  it('submit and cancel leave no queue script defined on the caller connection', async () => {
    const { jobId } = await client.submit({
      id: `${namespace}-1`,
      image: 'none',
      steps: [{ command: 'true' }],
    });
    await client.cancel(jobId);
    expect(await client.get(jobId)).not.toBeNull();
    expect(Object.keys(redis.scriptsSet)).toEqual([]);
  });
});
