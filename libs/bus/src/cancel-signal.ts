import { SCHEMA_VERSION } from '@sandstream/wire';
import { busLua } from './bus-lua.js';
import type { DispatchKeys } from './dispatch-keys.js';
import { deadlineMember } from './dispatch-keys.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

/**
 * Tells a running job's agent to kill its running step. Reads the running stepId from the
 * dispatcher's state in the same script that pushes the control message, so the cancel names
 * exactly the step that runs at that moment (a cancel for a finished step is ignored by the agent).
 */
const SIGNAL = busLua.load('dispatch-cancel-signal');

export interface CancelSignalOptions {
  redis: RedisClient;
  keySpace: KeySpace;
  dispatchKeys: DispatchKeys;
  /** How long the agent has to confirm before the dispatcher ends the job as cancelled anyway. */
  confirmWithinMs?: number;
}

/**
 * The running-job half of a cancel (job-store's requestCancel records the request and cancels a
 * job that has not started): signal the agent, and leave a deadline so the dispatcher ends the
 * job even if the agent never answers. Returns the stepId that was signalled, or null when no
 * step was running (the dispatcher sees the flag before it pushes another).
 */
export async function signalCancel(
  options: CancelSignalOptions,
  jobId: string,
  reason: string,
): Promise<string | null> {
  const { redis, keySpace, dispatchKeys } = options;
  const stepId = await SIGNAL.run<string>(
    redis,
    [dispatchKeys.dispatchState(jobId), keySpace.sandbox(jobId).control],
    [SCHEMA_VERSION, reason.slice(0, 1024)],
  );
  await redis.zadd(
    dispatchKeys.deadlines(dispatchKeys.shardOf(jobId)),
    Date.now() + (options.confirmWithinMs ?? 3_000),
    deadlineMember({ kind: 'cancel', jobId }),
  );
  return stepId === '' ? null : stepId;
}
