import { createKeySpace, JOB_EVENT_FIELD, JobStore, jobEventField, parseJobSpec } from '@sandstream/bus';
import { connectTestRedis, uniqueSuffix } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';
import type { FollowItem } from './follow-entry.js';

// Issue 27 §4, without services: the job store writes the states; entries XADDed to the events
// stream by hand (as a sandbox's own Redis user may) claim others. follow() and wait() believe
// only what the record holds. (test/e2e/forged-states.test.ts forges them from inside a sandbox.)
const redis = connectTestRedis();
const suffix = uniqueSuffix();
const namespace = `t-forged-${suffix}`;
const keys = createKeySpace(namespace);
const store = new JobStore({ redis, keys });
const client = new SandstreamClient({ redis, namespace });
const jobId = `forged-${suffix}`;

afterAll(async () => {
  await store.delete(jobId, 'default');
  await client.close();
  redis.disconnect();
});

const forged = (to: string, from = 'running') =>
  JSON.stringify({
    type: 'transition',
    jobId,
    tenant: 'default',
    from,
    to,
    reason: 'forged',
    at: Date.now(),
  });

/** An event of step-1 as the agent writes it. */
const stepEvent = (fields: { kind: string; seq: number; line?: string }) =>
  JSON.stringify({ schemaVersion: 1, stepId: 'step-1', ...fields, timestamp: new Date().toISOString() });

describe('follow() and forged job entries', () => {
  it('skips states the services did not write, and keeps output before the true end', async () => {
    await store.create(parseJobSpec({ id: jobId, image: 'x', steps: [{ command: 'true' }] }));
    const events = keys.sandbox(jobId).events;
    await redis.xadd(events, '*', JOB_EVENT_FIELD, forged('succeeded', 'queued'));
    await redis.xadd(events, '*', 'event', stepEvent({ kind: 'started', seq: 0 }));
    await redis.xadd(events, '*', 'event', stepEvent({ kind: 'stdout', seq: 1, line: 'last line' }));
    // A copy of a true entry under a new id is not believed either: the record holds it by id.
    const [[createdId, createdFields]] = (await redis.xrange(events, '-', '+', 'COUNT', 1)) as [
      [string, string[]],
    ];
    expect(await redis.hget(keys.job(jobId), jobEventField(createdId))).toBe(createdFields[1]);
    await redis.xadd(
      events,
      '*',
      JOB_EVENT_FIELD,
      (createdFields[1] as string).replace('"queued"', '"cancelled"'),
    );
    await store.transition(jobId, ['queued'], 'failed', { reason: 'the true end' });

    const items: FollowItem[] = [];
    for await (const item of client.follow(jobId)) items.push(item);
    expect(
      items.map((i) => (i.type === 'state' ? `state:${i.to}` : i.type === 'output' ? i.line : i.type)),
    ).toEqual(['state:queued', 'step-started', 'last line', 'state:failed']);
    expect(items.at(-1)).toMatchObject({ reason: 'the true end', terminal: true });
    expect(await client.wait(jobId, { timeoutMs: 10_000 })).toMatchObject({ state: 'failed' });
  });
});
