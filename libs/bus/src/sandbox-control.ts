import { type ControlMessage, encodeCancel } from '@sandstream/wire';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

/** One cancel for the agent: the step (or live command) it means, why, and its first signal. */
export interface CancelMessage {
  stepId: string;
  reason?: string;
  signal?: ControlMessage['signal'];
}

/**
 * The one writer of the agent's control list (`sandbox:{id}:control`): the step-dispatcher (a
 * step past its deadline, a closing sandbox's open commands) and the SDK (`sendCancel`) push
 * through it. The dispatcher's finish and cancel scripts write the same list inside their
 * script, with the message `encodeCancel` made. A cancel of a step already finished is harmless:
 * it names its step.
 */
export async function pushCancel(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
  ...messages: CancelMessage[]
): Promise<void> {
  if (messages.length === 0) return;
  await redis.lpush(
    keys.sandbox(jobId).control,
    ...messages.map((m) => encodeCancel(m.stepId, m.reason, m.signal)),
  );
}
