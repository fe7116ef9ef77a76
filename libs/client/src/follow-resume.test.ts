import { JobSpecSchema, JobStore } from '@sandstream/bus';
import { connectTestRedis, deleteNamespaceKeys, uniqueNamespace } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';
import type { FollowItem } from './follow-entry.js';
import { stepEventFields as event } from './testing/step-events.js';

// Resuming a follow from the cursor of any item, where the agent packed a quick step's events
// into one stream entry: the follower goes on with the next item, nothing replayed or skipped.
const namespace = uniqueNamespace('resume');
const redis = connectTestRedis();
const client = new SandstreamClient({ redis, namespace });
const store = new JobStore({ redis, keys: client.keys });

afterAll(async () => {
  await client.close();
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
});

async function follow(jobId: string, from?: string): Promise<FollowItem[]> {
  const items: FollowItem[] = [];
  for await (const item of client.follow(jobId, { untilNow: true, ...(from ? { from } : {}) }))
    items.push(item);
  return items;
}

describe('follow from a cursor inside a packed entry', () => {
  it('goes on with the item after the cursor, for every item of the timeline', async () => {
    const { jobId } = await store.create(
      JobSpecSchema.parse({ id: `${namespace}-packed`, image: 'none', steps: [{ command: 'true' }] }),
    );
    const key = client.keys.sandbox(jobId).events;
    // One entry holding a whole quick step, then a step written an event at a time.
    await redis.xadd(
      key,
      '*',
      ...event('a', 'started', 0),
      ...event('a', 'stdout', 1),
      ...event('a', 'stdout', 2),
      ...event('a', 'completed', 3, { exitCode: 0 }),
    );
    await redis.xadd(key, '*', ...event('b', 'started', 0));
    await redis.xadd(key, '*', ...event('b', 'stdout', 1), ...event('b', 'stdout', 2));

    const all = (await follow(jobId)).filter((item) => item.type !== 'state');
    expect(all.map((item) => item.type)).toEqual([
      'step-started',
      'output',
      'output',
      'step-completed',
      'step-started',
      'output',
      'output',
    ]);
    expect(new Set(all.map((item) => item.cursor)).size).toBe(all.length);
    for (const [i, item] of all.entries()) {
      const rest = (await follow(jobId, item.cursor)).filter((next) => next.type !== 'state');
      expect(rest, `resumed after item ${i} (${item.cursor})`).toEqual(all.slice(i + 1));
    }
  });

  it('refuses a cursor that is neither an entry id nor an entry id with an item index', async () => {
    const run = () => client.follow('any', { from: '1700-0:x' })[Symbol.asyncIterator]().next();
    await expect(run()).rejects.toThrow(/from must be a follow cursor/);
  });
});
