import type { KeySpace, RedisClient } from '@sandstream/bus';
import type { StepResult } from '@sandstream/wire';

/**
 * Kernels live in the agent's process tree, so a pause (or anything that replaces the agent)
 * ends them, and the new agent cannot know the context had a state. The sandbox's contexts are
 * recorded beside its job record (KeySpace.jobCodeContexts, kept through pauses): when an agent
 * says it started a context's kernel for a cell and the context was recorded before, that cell
 * ran without the state its context had, and says `stateLost`. One HSETNX, only on a kernel start.
 */
export async function kernelReplacedState(
  redis: RedisClient,
  keys: KeySpace,
  sandboxId: string,
  result: StepResult,
): Promise<boolean> {
  const output = result.output;
  if (output?.kind !== 'code' || !output.kernelStarted) return false;
  const added = await redis.hsetnx(keys.jobCodeContexts(sandboxId), output.context, '1');
  return added === 0;
}
