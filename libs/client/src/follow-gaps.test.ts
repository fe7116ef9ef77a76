import { JobSpecSchema, JobStore } from '@sandstream/bus';
import { connectTestRedis, deleteNamespaceKeys, uniqueNamespace } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';
import type { FollowItem } from './follow-entry.js';
import { stepEventFields as event } from './testing/step-events.js';

// A job's events stream written by hand, as the agent writes it (the wire's encoder, XADD with a
// MAXLEN), but capped exact and tiny so that trimming is certain and its extent known.
const namespace = uniqueNamespace('gaps');
const redis = connectTestRedis();
const client = new SandstreamClient({ redis, namespace });
const store = new JobStore({ redis, keys: client.keys });

afterAll(async () => {
  await client.close();
  await deleteNamespaceKeys(redis, namespace);
  redis.disconnect();
});

async function createJob(name: string): Promise<string> {
  const { jobId } = await store.create(
    JobSpecSchema.parse({ id: `${namespace}-${name}`, image: 'none', steps: [{ command: 'true' }] }),
  );
  return jobId;
}

/** XADDs each event, the stream capped at exactly `cap` entries (no cap: unbounded). */
async function write(jobId: string, events: [string, string][], cap?: number): Promise<void> {
  const key = client.keys.sandbox(jobId).events;
  const pipeline = redis.pipeline();
  for (const fields of events) {
    if (cap === undefined) pipeline.xadd(key, '*', ...fields);
    else pipeline.xadd(key, 'MAXLEN', cap, '*', ...fields);
  }
  await pipeline.exec();
}

function lines(stepId: string, from: number, to: number): [string, string][] {
  return Array.from({ length: to - from + 1 }, (_, i) => event(stepId, 'stdout', from + i));
}

/** Items without their cursors, lines shortened to their seq: what a reader of the timeline sees. */
function shape(item: FollowItem): unknown {
  switch (item.type) {
    case 'output':
      return item.seq;
    case 'gap':
      return { gap: [item.from, item.to], ...(item.startTrimmed ? { startTrimmed: true } : {}) };
    case 'step-completed':
      return `completed ${item.seq}`;
    case 'step-started':
      return 'started';
    case 'state':
      return item.to;
    default:
      return item.type;
  }
}

describe('follow() marks gaps in place', () => {
  it('shows lines trimmed under a live follower, and lines the agent dropped, where they were', async () => {
    const jobId = await createJob('live');
    for (const [from, to] of [
      ['queued', 'scheduled'],
      ['scheduled', 'starting'],
      ['starting', 'running'],
    ] as const)
      await store.transition(jobId, [from], to);
    await write(jobId, [event('step-1', 'started', 0), ...lines('step-1', 1, 10)]);
    const timeline = client.follow(jobId)[Symbol.asyncIterator]();
    const seen: FollowItem[] = [];
    while (seen.at(-1)?.type !== 'output' || (seen.at(-1) as { seq: number }).seq < 10)
      seen.push((await timeline.next()).value as FollowItem);
    // While the follower is away: 90 more lines, the stream capped at 20 entries, then 50 lines
    // the agent had to drop (numbered, never written) and the step's end.
    await write(
      jobId,
      [...lines('step-1', 11, 100), event('step-1', 'completed', 151, { exitCode: 0, droppedLines: 50 })],
      20,
    );
    await store.transition(jobId, ['running'], 'succeeded');
    for (let next = await timeline.next(); !next.done; next = await timeline.next()) seen.push(next.value);
    expect(seen.map(shape)).toEqual([
      'queued',
      'scheduled',
      'starting',
      'running',
      'started',
      ...range(1, 10),
      { gap: [11, 81] },
      ...range(82, 100),
      { gap: [101, 150] },
      'completed 151',
      'succeeded',
    ]);
    const gap = seen.find((i) => i.type === 'gap');
    // Resuming from a gap's cursor reads again from the line that revealed it.
    expect(gap?.cursor).toBe(seen[seen.indexOf(gap as FollowItem) - 1]?.cursor);
  });

  it("says when a step's start was trimmed, and takes a resumed follow's steps as already seen", async () => {
    const jobId = await createJob('start');
    await write(
      jobId,
      [
        event('step-1', 'started', 0),
        ...lines('step-1', 1, 50),
        event('step-1', 'completed', 51, { exitCode: 0 }),
        event('step-2', 'started', 0),
        event('step-2', 'completed', 1, { exitCode: 0 }),
      ],
      12,
    );
    await store.transition(jobId, ['queued'], 'cancelled');
    const all: FollowItem[] = [];
    for await (const item of client.follow(jobId)) all.push(item);
    expect(all.map(shape)).toEqual([
      { gap: [1, 41], startTrimmed: true },
      ...range(42, 50),
      'completed 51',
      'started',
      'completed 1',
      'cancelled',
    ]);
    const resumed: FollowItem[] = [];
    const line45 = all.find((i) => i.type === 'output' && i.seq === 45);
    for await (const item of client.follow(jobId, { from: line45?.cursor })) resumed.push(item);
    expect(resumed.map(shape)).toEqual([
      ...range(46, 50),
      'completed 51',
      'started',
      'completed 1',
      'cancelled',
    ]);
  });

  it('marks a step met only at its end, its started event alone trimmed, with an empty gap', async () => {
    const jobId = await createJob('bare');
    await write(jobId, [event('step-1', 'started', 0), event('step-1', 'completed', 1, { exitCode: 0 })], 1);
    await store.transition(jobId, ['queued'], 'cancelled');
    const all: FollowItem[] = [];
    for await (const item of client.follow(jobId)) all.push(item);
    expect(all.map(shape)).toEqual([{ gap: [1, 0], startTrimmed: true }, 'completed 1', 'cancelled']);
  });
});

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}
