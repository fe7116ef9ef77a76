import type { SandboxRecord } from '@sandstream/bus';
import {
  SandboxClosedError,
  SandboxNotFoundError,
  SandboxPausedError,
  SandboxTimeoutError,
} from './sandbox-errors.js';

/**
 * Whether a sandbox's record says it takes commands (true), may still get there (false), or
 * never will: unknown, paused or pausing, ended (thrown, with its state).
 */
export function isReady(id: string, sandbox: SandboxRecord | null): boolean {
  if (!sandbox) throw new SandboxNotFoundError(id);
  if (sandbox.state === 'ready') return true;
  if (sandbox.state === 'paused' || sandbox.state === 'pausing')
    throw new SandboxPausedError(id, sandbox.state);
  if (sandbox.state === 'closing' || sandbox.state === 'closed' || sandbox.state === 'failed') {
    throw new SandboxClosedError(id, sandbox.state, sandbox.reason, sandbox.message);
  }
  return false;
}

/** The error of a readiness wait that ran out. */
export function notReadyError(id: string, timeoutSeconds: number | undefined, sandbox: SandboxRecord) {
  return new SandboxTimeoutError(
    `sandbox ${id} not ready after ${timeoutSeconds} s (it is ${sandbox.state})`,
  );
}

/** How long pause() waits for the services to pause the sandbox before it gives up waiting. */
const PAUSE_WAIT_MS = 120_000;

/**
 * Polls a sandbox's record until it is paused; throws when it ended instead (a close asked
 * meanwhile, a failure to keep its files) or the wait ran out.
 */
export async function waitPaused(
  get: (id: string) => Promise<SandboxRecord | null>,
  id: string,
): Promise<SandboxRecord> {
  const deadline = Date.now() + PAUSE_WAIT_MS;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const sandbox = await get(id);
    if (!sandbox) throw new SandboxNotFoundError(id);
    // Paused: its files kept and its sandbox gone (its slot was free from the first).
    if (sandbox.state === 'paused') return sandbox;
    if (sandbox.state === 'closed' || sandbox.state === 'failed' || sandbox.state === 'closing')
      throw new SandboxClosedError(id, sandbox.state, sandbox.reason, sandbox.message);
    if (Date.now() > deadline)
      throw new SandboxTimeoutError(`sandbox ${id} still ${sandbox.state} after pause`);
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}
