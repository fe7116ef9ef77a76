/**
 * Redis refusing the sandbox's credentials (WRONGPASS, NOAUTH). After Redis restarts, even with
 * its AOF, the per-sandbox ACL users are gone until a service re-creates them from the hashes it
 * kept (pod-lifecycle's SandboxUserRestorer), which takes a few seconds. ioredis rejects every
 * queued command with the refusal on each reconnect attempt, so without this the agent would
 * treat a recoverable state as fatal and exit at once.
 */
export function isAuthError(err: unknown): boolean {
  const message = err instanceof Error ? err.message : String(err);
  return /WRONGPASS|NOAUTH|invalid username-password pair/.test(message);
}

export class AgentAuthError extends Error {
  override readonly name = 'AgentAuthError';
}

/**
 * How long Redis has been refusing us without a break. Every Redis call of the agent that sees a
 * refusal reports it (`failed`), every success resets it; once the refusals have lasted longer
 * than the limit, the sandbox's user is considered gone for good and the agent gives up (exit 3).
 */
export class AuthFailureClock {
  private since: number | null = null;

  constructor(
    readonly limitMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** True while a streak of refusals lasts (log once per streak, not once per attempt). */
  get failing(): boolean {
    return this.since !== null;
  }

  failed(): void {
    this.since ??= this.now();
  }

  succeeded(): void {
    this.since = null;
  }

  expired(): boolean {
    return this.since !== null && this.now() - this.since > this.limitMs;
  }

  /** Throws AgentAuthError when the refusals have lasted past the limit. */
  assertNotExpired(): void {
    if (this.expired()) {
      throw new AgentAuthError(
        `Redis has refused this sandbox's credentials for over ${Math.round(this.limitMs / 1000)} s ` +
          '(WRONGPASS/NOAUTH): its Redis user is gone and was not re-created; giving up',
      );
    }
  }

  /**
   * Runs `attempt` until it succeeds or fails with something other than a refusal; between
   * refusals it waits `pauseMs` (the connection is reconnecting meanwhile). Throws
   * AgentAuthError once the limit passes.
   */
  async retry<T>(attempt: () => Promise<T>, pauseMs = 500): Promise<T> {
    for (;;) {
      try {
        const value = await attempt();
        this.succeeded();
        return value;
      } catch (err) {
        if (!isAuthError(err)) throw err;
        this.failed();
        this.assertNotExpired();
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
    }
  }
}
