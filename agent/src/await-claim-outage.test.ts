import { createHash } from 'node:crypto';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { sandboxKeys } from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { POLL, popResult, pushStep, startAgent, stopAgent, uniqueJobId } from './testing/agent-harness.js';

// What a Redis restart does to a warm pool member waiting for its claim: its connection drops,
// and once Redis is back its ACL user is gone (users are not in the AOF) until pod-lifecycle
// re-creates it from the kept password hash. The member must come through it alive.
const privateRedis = usePrivateRedis({ maxRetriesPerRequest: null });
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

const PASSWORD = 'member-secret';
const userRules = (password: string) => [
  'reset',
  'on',
  password,
  '~*',
  'resetchannels',
  '&*',
  '-@all',
  '+@all',
];

/** True once Redis refused `username` (a fresh server's ACL LOG holds only what happened since it started). */
async function refused(admin: Redis, username: string): Promise<boolean> {
  const log = (await admin.call('ACL', 'LOG')) as unknown[][];
  return log.some((entry) => entry.includes(username));
}

describe('a warm pool member (--await-claim) whose Redis restarts', () => {
  it('keeps waiting through a SIGTERM and a kill -9 restart, heart-beats again and serves its claim', async () => {
    const { server, redis } = privateRedis;
    const memberId = uniqueJobId('member-restart');
    const jobId = uniqueJobId('claimed-after-restart');
    const member = sandboxKeys(memberId, 'tagged');
    const job = sandboxKeys(jobId, 'tagged');
    const username = `sbx-${memberId}`;
    const hash = createHash('sha256').update(PASSWORD).digest('hex');
    await redis.call('ACL', 'SETUSER', username, ...userRules(`>${PASSWORD}`));
    const agent = startAgent({
      jobId: memberId,
      keyStyle: 'tagged',
      redisUrl: `redis://${username}:${PASSWORD}@127.0.0.1:${server.port}`,
      extraArgs: ['--await-claim', '--heartbeat-interval-ms', '500'],
    });
    cleanups.push(() => stopAgent(agent));
    await expect.poll(() => redis.exists(member.heartbeat), POLL).toBe(1);

    const count = (msg: string) => agent.logs().filter((l) => l.msg === msg).length;
    const BACK = 'redis is back; warm pool member still waiting for a claim';
    for (const restart of [() => server.terminate(), () => server.kill()]) {
      const back = count(BACK);
      await restart();
      await server.start();
      // Back, but without the member's user: the agent is refused until it is re-created.
      await expect.poll(() => refused(redis, username), { ...POLL, timeout: 30_000 }).toBe(true);
      // Refused for several of its heartbeat periods, as while pod-lifecycle notices the restart.
      await new Promise((resolve) => setTimeout(resolve, 3000));
      expect(agent.child.exitCode).toBeNull();
      await redis.call('ACL', 'SETUSER', username, ...userRules(`#${hash}`));
      await expect.poll(() => redis.exists(member.heartbeat), { ...POLL, timeout: 30_000 }).toBe(1);
      await expect.poll(() => count(BACK), POLL).toBeGreaterThan(back);
    }

    await pushStep(redis, job, {
      schemaVersion: 1,
      stepId: 's1',
      command: 'sh',
      args: ['-c', 'echo served'],
    });
    await redis.lpush(member.claim, JSON.stringify({ jobId, env: {}, unsetEnv: [], claimedAt: Date.now() }));
    expect(await popResult(redis, job, 30)).toMatchObject({ stepId: 's1', exitCode: 0 });
    expect(agent.child.exitCode).toBeNull();
  }, 120_000);
});
