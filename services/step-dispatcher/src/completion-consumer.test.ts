import { COMPLETION_GROUP, createKeySpace, DispatchKeys } from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { type CompletionNotice, encodeCompletionNotice } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import { CompletionConsumer } from './completion-consumer.js';

// A Redis restarted without its data has no consumer groups: a private redis-server, flushed.
describe('CompletionConsumer after Redis lost its data', () => {
  const own = usePrivateRedis({ maxRetriesPerRequest: null });

  it('recreates its consumer group on NOGROUP and goes on reading notices', async () => {
    const keys = new DispatchKeys(createKeySpace('nogroup'), 2);
    const handled: CompletionNotice[] = [];
    const consumer = new CompletionConsumer({
      redis: own.redis,
      keys,
      consumerName: 'c1',
      handle: async (notice) => {
        handled.push(notice);
      },
      logger: silentLogger('completion-consumer-test'),
      blockMs: 200,
      claimIntervalMs: 200,
    });
    await consumer.start();
    const notify = (jobId: string) =>
      own.redis.xadd(
        keys.completionStreamFor(jobId),
        '*',
        ...encodeCompletionNotice({ jobId, stepId: 'step-1' }),
      );
    const until = (jobId: string) =>
      expect
        .poll(() => handled.some((n) => n.jobId === jobId), {
          timeout: 15_000,
          interval: 50,
          message: `notice of ${jobId} handled`,
        })
        .toBe(true);
    try {
      await notify('before');
      await until('before');
      await own.redis.flushall();
      // XADD recreates the stream, but not the group: reads now answer NOGROUP.
      await notify('after');
      await until('after');
      const groups = (await own.redis.xinfo('GROUPS', keys.completionStreamFor('after'))) as unknown[][];
      expect(groups.map((g) => g[1])).toEqual([COMPLETION_GROUP]);
    } finally {
      await consumer.stop();
    }
  });
});
