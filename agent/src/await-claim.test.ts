import { freePort } from '@sandstream/test-support';
import { sandboxKeys } from '@sandstream/wire';
import { describe, expect, it, vi } from 'vitest';
import {
  deleteKeys,
  POLL,
  popResult,
  pushStep,
  readEvents,
  startAgent,
  stopAgent,
  uniqueJobId,
} from './testing/agent-harness.js';
import { useTestRedis } from './testing/test-redis.js';

const { redis, cleanups } = useTestRedis();

describe('a warm pool member (--await-claim)', () => {
  it('heart-beats as the member, then runs steps as the job it is claimed for, with the claim env', async () => {
    const memberId = uniqueJobId('member');
    const jobId = uniqueJobId('claimed');
    const member = sandboxKeys(memberId, 'tagged');
    const job = sandboxKeys(jobId, 'tagged');
    const agent = startAgent({
      jobId: memberId,
      keyStyle: 'tagged',
      extraArgs: ['--await-claim', '--heartbeat-interval-ms', '200'],
      env: { FROM_MEMBER: 'member', DROPPED: 'yes' },
    });
    cleanups.push(
      () => deleteKeys(redis, member),
      () => deleteKeys(redis, job),
      () => stopAgent(agent),
    );
    await expect.poll(() => redis.exists(member.heartbeat), POLL).toBe(1);
    // Nothing runs before a claim: a step on the job's keys waits.
    await pushStep(redis, job, {
      schemaVersion: 1,
      kind: 'run',
      stepId: 's1',
      command: 'sh',
      args: ['-c', 'echo "$FROM_MEMBER $FROM_CLAIM $(printenv DROPPED || echo unset)"'],
      timeoutSeconds: 10,
    });
    // An absence over a while is what is tested: no event marks "did not take it".
    await new Promise((r) => setTimeout(r, 300));
    expect(await redis.llen(job.in)).toBe(1);

    await redis.lpush(
      member.claim,
      JSON.stringify({ jobId, env: { FROM_CLAIM: 'claim' }, unsetEnv: ['DROPPED'], claimedAt: Date.now() }),
    );
    const result = await popResult(redis, job);
    expect(result, JSON.stringify(result)).toMatchObject({ exitCode: 0 });
    const lines = (await readEvents(redis, job, 's1')).filter((e) => e.kind === 'stdout').map((e) => e.line);
    expect(lines).toEqual(['member claim unset']);
    // The member's identity is gone: its heartbeat no longer refreshed, the job's is.
    await expect.poll(() => redis.exists(member.heartbeat), POLL).toBe(0);
    expect(await redis.exists(job.heartbeat)).toBe(1);
    expect(agent.logs().some((l) => l.msg === 'claimed from a warm pool' && l.jobId === jobId)).toBe(true);
  });

  it('exits 3 on a claim it cannot read, naming the field', async () => {
    const memberId = uniqueJobId('member');
    const member = sandboxKeys(memberId, 'tagged');
    const agent = startAgent({ jobId: memberId, keyStyle: 'tagged', extraArgs: ['--await-claim'] });
    cleanups.push(
      () => deleteKeys(redis, member),
      () => stopAgent(agent),
    );
    await expect.poll(() => redis.exists(member.heartbeat), POLL).toBe(1);
    await redis.lpush(member.claim, JSON.stringify({ jobId: 'bad id {x}', surplus: 1 }));
    expect((await agent.exited).code).toBe(3);
    expect(agent.stderr()).toMatch(/invalid claim: .*jobId/);
  });

  it('exits 0 on SIGTERM while it waits', async () => {
    const memberId = uniqueJobId('member');
    const member = sandboxKeys(memberId, 'tagged');
    const agent = startAgent({ jobId: memberId, keyStyle: 'tagged', extraArgs: ['--await-claim'] });
    cleanups.push(() => deleteKeys(redis, member));
    await expect.poll(() => redis.exists(member.heartbeat), POLL).toBe(1);
    agent.child.kill('SIGTERM');
    expect((await agent.exited).code).toBe(0);
  });

  it('exits 0 on SIGTERM while it waits for a Redis it cannot reach', async () => {
    const closed = `redis://127.0.0.1:${await freePort()}`;
    const agent = startAgent({
      jobId: uniqueJobId('member-offline'),
      keyStyle: 'tagged',
      redisUrl: closed,
      extraArgs: ['--await-claim', '--verbose'],
    });
    // In its wait once its claim connection has been refused (debug lines, hence --verbose): its
    // first heartbeat waits for the reconnect that never comes.
    await vi.waitUntil(() => /"msg":"redis connection error"[^\n]*"role":"claim"/.test(agent.stderr()), POLL);
    agent.child.kill('SIGTERM');
    expect((await agent.exited).code).toBe(0);
  }, 30_000);
});
