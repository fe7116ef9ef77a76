import { pollUntil } from '@sandstream/test-support';
import { describe, expect, it } from 'vitest';
import {
  builtSpawnerPath,
  childPids,
  deleteKeys,
  seaCommand,
  startAgent,
  stopAgent,
  testClient,
} from './testing/agent-harness.js';

/**
 * What a boot does before its first heartbeat (issue 18): the spawner helper is forked only once
 * the heartbeat is in Redis, and the connections that pop (`steps`, `control`) connect only then.
 * Run with the single executable, as every sandbox starts it.
 */
describe('boot order', () => {
  it('forks no spawner helper while the first heartbeat cannot be written, and exits 0 on SIGTERM', async () => {
    // Nothing listens on port 1: every connection attempt is refused, and the agent keeps trying.
    const agent = startAgent({
      redisUrl: 'redis://127.0.0.1:1',
      command: seaCommand(),
      extraArgs: ['--verbose', '--spawner', builtSpawnerPath()],
    });
    const pid = agent.child.pid as number;
    try {
      // Three refused attempts (50 + 100 ms of back-off apart): well past the boot's first turns.
      await pollUntil(
        'three refused connection attempts',
        () => (agent.logs().filter((l) => l.msg === 'redis connection error').length >= 3 ? true : undefined),
        { timeoutMs: 10_000, intervalMs: 20 },
      );
      expect(childPids(pid)).toEqual([]);
      // Only the writer tried: the popping connections wait for their first command.
      const roles = new Set(
        agent
          .logs()
          .filter((l) => l.msg === 'redis connection error')
          .map((l) => l.role),
      );
      expect([...roles]).toEqual(['writer']);
      agent.child.kill('SIGTERM');
      expect(await agent.exited).toEqual({ code: 0, signal: null });
    } finally {
      if (agent.child.exitCode === null) agent.child.kill('SIGKILL');
    }
  });

  it('starts the spawner helper and both popping connections once the first heartbeat is in Redis', async () => {
    const redis = testClient();
    const agent = startAgent({ command: seaCommand(), extraArgs: ['--spawner', builtSpawnerPath()] });
    const pid = agent.child.pid as number;
    try {
      await pollUntil('the helper', () => (childPids(pid).length === 1 ? true : undefined), {
        timeoutMs: 10_000,
        intervalMs: 20,
      });
      expect(await redis.exists(agent.keys.heartbeat)).toBe(1);
      const names = await pollUntil(
        'the popping connections',
        async () => {
          const list = (await redis.client('LIST')) as string;
          const mine = [...list.matchAll(/name=sandstream-agent:(\S+)/g)]
            .map((m) => m[1] as string)
            .filter((n) => n.startsWith(`${agent.jobId}:`));
          return mine.length === 3 ? mine.sort() : undefined;
        },
        { timeoutMs: 10_000, intervalMs: 20 },
      );
      expect(names).toEqual([`${agent.jobId}:control`, `${agent.jobId}:steps`, `${agent.jobId}:writer`]);
    } finally {
      await stopAgent(agent);
      await deleteKeys(redis, agent.keys);
      redis.disconnect();
    }
  });
});
