import type { SandboxRecord } from '@sandstream/bus';
import { SandboxClosedError, SandboxNotFoundError, SandboxTimeoutError } from './sandbox-errors.js';

/**
 * Polls a sandbox's record (through either transport) until it takes commands; throws when it
 * ended, is unknown, or `timeoutSeconds` passed first.
 */
export async function waitReady(
  get: (id: string) => Promise<SandboxRecord | null>,
  id: string,
  timeoutSeconds: number | undefined,
  signal: AbortSignal | undefined,
): Promise<void> {
  const deadline =
    timeoutSeconds === undefined ? Number.POSITIVE_INFINITY : Date.now() + timeoutSeconds * 1000;
  for (let pause = 10; ; pause = Math.min(pause * 2, 250)) {
    const sandbox = await get(id);
    if (!sandbox) throw new SandboxNotFoundError(id);
    if (sandbox.state === 'ready') return;
    if (sandbox.state === 'closing' || sandbox.state === 'closed' || sandbox.state === 'failed') {
      throw new SandboxClosedError(id, sandbox.state, sandbox.reason, sandbox.message);
    }
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    if (Date.now() > deadline) {
      throw new SandboxTimeoutError(
        `sandbox ${id} not ready after ${timeoutSeconds} s (it is ${sandbox.state})`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}
