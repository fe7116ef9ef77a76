import { AGENT_ONLY_ENV } from '@sandstream/wire';
import { describe, expect, it } from 'vitest';
import {
  deleteKeys,
  popResult,
  pushStep,
  readEvents,
  startAgent,
  stopAgent,
  uniqueJobId,
} from './testing/agent-harness.js';
import { useTestRedis } from './testing/test-redis.js';

// The backends start the agent with AGENT_ONLY_ENV (one malloc arena, for its memory goal); the
// user's commands must not inherit it, while a step that sets the same variable itself keeps it.
const { redis } = useTestRedis();

describe('variables set for the agent alone', () => {
  it('do not reach a step; a step that sets one itself keeps its value', async () => {
    const agent = startAgent({ jobId: uniqueJobId('agent-only-env'), env: { ...AGENT_ONLY_ENV } });
    try {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: shell parameter expansions, for sh -c
      const script = 'echo "arena=${MALLOC_ARENA_MAX:-unset} marker=${SANDSTREAM_AGENT_ONLY_ENV:-unset}"';
      await pushStep(redis, agent.keys, {
        schemaVersion: 1,
        stepId: 'inherit',
        command: 'sh',
        args: ['-c', script],
      });
      expect((await popResult(redis, agent.keys)).exitCode).toBe(0);
      await pushStep(redis, agent.keys, {
        schemaVersion: 1,
        stepId: 'own',
        command: 'sh',
        args: ['-c', script],
        env: { MALLOC_ARENA_MAX: '4' },
      });
      expect((await popResult(redis, agent.keys)).exitCode).toBe(0);
      const lines = (await readEvents(redis, agent.keys))
        .filter((e) => e.kind === 'stdout')
        .map((e) => `${e.stepId}:${e.line}`);
      expect(lines).toEqual(['inherit:arena=unset marker=unset', 'own:arena=4 marker=unset']);
    } finally {
      await stopAgent(agent);
      await deleteKeys(redis, agent.keys);
    }
  });
});
