import { setTimeout as sleep } from 'node:timers/promises';
import { pollUntil } from '@sandstream/poll';
import type { WaitReadyOptions } from './backend.js';

/**
 * While it waits for the agent's announcement, a start looks this often whether the process or
 * container still runs: an agent that crashes at boot is reported (agent_crashed, with its last
 * output) within this time, without a check every few milliseconds.
 */
export const LIVENESS_CHECK_MS = 250;

/** Heartbeat polling, for callers that pass no announcement (tests, tools): what readiness was before. */
const HEARTBEAT_POLL_MS = 15;

export type AgentWaitOutcome<E> = { kind: 'ready' } | { kind: 'ended'; ended: E } | { kind: 'deadline' };

export interface AgentWaitParams<E> {
  /** Budget in milliseconds from the call. */
  deadlineMs: number;
  options: WaitReadyOptions;
  /** Undefined while the sandbox's process or container runs; what ended it otherwise. */
  ended: () => Promise<E | undefined>;
  /** Settles when the sandbox ends, where the backend is told at once (a child's exit event). */
  endedSignal?: Promise<unknown>;
  /**
   * Once the agent announced itself: 'ready', or undefined when the backend does not see the
   * sandbox running yet (checked again shortly), or what ended it.
   */
  confirm?: () => Promise<'ready' | E | undefined>;
}

/**
 * Waits for a sandbox's agent by blocking on its announcement (WaitReadyOptions.agentAnnounced),
 * waking every LIVENESS_CHECK_MS, or at once on `endedSignal`, to see whether the sandbox is gone.
 * Without an announcement source it polls the heartbeat key as before.
 */
export async function waitForAgent<E>(params: AgentWaitParams<E>): Promise<AgentWaitOutcome<E>> {
  const { options } = params;
  const deadline = Date.now() + params.deadlineMs;
  const announced = options.agentAnnounced ?? pollHeartbeat(options.isAgentAlive);
  // Resolves false when the sandbox ends, so a wait for the announcement stops early.
  const endedEarly = params.endedSignal?.then(
    () => false,
    () => false,
  );
  for (;;) {
    options.signal?.throwIfAborted();
    const ended = await params.ended();
    if (ended !== undefined) return { kind: 'ended', ended };
    const remaining = deadline - Date.now();
    if (remaining <= 0) return { kind: 'deadline' };
    const wait = announced(Math.min(LIVENESS_CHECK_MS, remaining));
    if (!(await (endedEarly ? Promise.race([wait, endedEarly]) : wait))) continue;
    const confirmed = params.confirm ? await params.confirm() : 'ready';
    if (confirmed === 'ready') return { kind: 'ready' };
    if (confirmed !== undefined) return { kind: 'ended', ended: confirmed };
    await sleep(Math.min(HEARTBEAT_POLL_MS, Math.max(deadline - Date.now(), 0)));
  }
}

function pollHeartbeat(isAgentAlive: () => Promise<boolean>): (timeoutMs: number) => Promise<boolean> {
  return async (timeoutMs) =>
    (await pollUntil(async () => ((await isAgentAlive()) ? true : undefined), {
      deadline: Date.now() + timeoutMs,
      initialIntervalMs: HEARTBEAT_POLL_MS,
      maxIntervalMs: HEARTBEAT_POLL_MS,
    })) === true;
}
