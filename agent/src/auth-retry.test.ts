import { createHash } from 'node:crypto';
import { test } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, vi } from 'vitest';
import { POLL, popResult, pushStep, readEvents, startAgent, stopAgent } from './testing/agent-harness.js';

// What a Redis restart does to a sandbox: its ACL user vanishes (users are not in the AOF) and
// comes back a few seconds later, re-created by pod-lifecycle from the password's hash.
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

const PASSWORD = 'sandbox-secret';
const rules = (jobId: string, password: string[]) => [
  'reset',
  'on',
  ...password,
  `~sandbox:${jobId}:*`,
  'resetchannels',
  '-@all',
  '+@all',
];

async function refusedFor(admin: Redis, username: string): Promise<boolean> {
  const log = (await admin.call('ACL', 'LOG')) as unknown[][];
  return log.some((entry) => entry.includes(username));
}

describe('agent whose Redis user disappears', () => {
  test('keeps its step, result and output while Redis refuses it, and goes on once the user is back', async ({
    redisServer: server,
  }) => {
    const admin = new Redis(server.url, { maxRetriesPerRequest: null });
    cleanups.push(async () => admin.disconnect());
    const jobId = 'auth-retry-job';
    const username = 'sbx-auth-retry';
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`>${PASSWORD}`]));
    const agent = startAgent({
      jobId,
      redisUrl: `redis://${username}:${PASSWORD}@127.0.0.1:${server.port}`,
      // A short idle limit: refusals must not count as idle time.
      extraArgs: ['--idle-timeout-seconds', '1', '--max-idle-waits', '3', '--auth-retry-seconds', '60'],
    });
    cleanups.push(() => stopAgent(agent));

    await pushStep(admin, agent.keys, {
      schemaVersion: 1,
      stepId: 'during',
      command: 'sh',
      args: ['-c', 'sleep 2; echo still-here'],
    });
    await vi.waitUntil(
      async () => ((await readEvents(admin, agent.keys, 'during')).length > 0 ? true : undefined),
      POLL,
    );
    // DELUSER also closes the user's connections: the agent reconnects and is refused.
    await admin.call('ACL', 'DELUSER', username);
    await vi.waitUntil(async () => ((await refusedFor(admin, username)) ? true : undefined), POLL);
    // The outage: refused for longer than the agent's idle limit (3 s), as during a slow restart.
    await new Promise((r) => setTimeout(r, 4000));
    const hash = createHash('sha256').update(PASSWORD).digest('hex');
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`#${hash}`]));

    expect(await popResult(admin, agent.keys, 30)).toMatchObject({ stepId: 'during', exitCode: 0 });
    const lines = (await readEvents(admin, agent.keys, 'during')).filter((e) => e.kind === 'stdout');
    expect(lines.map((e) => e.line)).toEqual(['still-here']);
    await pushStep(admin, agent.keys, { schemaVersion: 1, stepId: 'after', command: 'true' });
    expect(await popResult(admin, agent.keys, 30)).toMatchObject({ stepId: 'after', exitCode: 0 });
    await pushStep(admin, agent.keys, { schemaVersion: 1, stepId: 'bye', kind: 'shutdown' });
    expect((await agent.exited).code).toBe(0);
  }, 60_000);

  test('gives up with exit 3 and says why once refused for longer than --auth-retry-seconds', async ({
    redisServer: server,
  }) => {
    const admin = new Redis(server.url, { maxRetriesPerRequest: null });
    cleanups.push(async () => admin.disconnect());
    const jobId = 'auth-gone-job';
    const username = 'sbx-auth-gone';
    await admin.call('ACL', 'SETUSER', username, ...rules(jobId, [`>${PASSWORD}`]));
    const agent = startAgent({
      jobId,
      redisUrl: `redis://${username}:${PASSWORD}@127.0.0.1:${server.port}`,
      extraArgs: ['--auth-retry-seconds', '2'],
    });
    cleanups.push(() => stopAgent(agent));
    await vi.waitUntil(async () => ((await admin.exists(agent.keys.heartbeat)) ? true : undefined), POLL);
    await admin.call('ACL', 'DELUSER', username);
    expect((await agent.exited).code).toBe(3);
    expect(agent.stderr()).toContain("refused this sandbox's credentials");
    expect(agent.stderr()).not.toContain(PASSWORD);
  }, 60_000);
});
