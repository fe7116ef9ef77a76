import { DEFAULT_NAMESPACE, type KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

/** What pod-lifecycle found when it asked the backend about a suspect sandbox. */
export interface LivenessVerdict {
  /** `running`: its process, container or pod runs; `gone`: it does not; `unknown`: cannot tell. */
  state: 'running' | 'gone' | 'unknown';
  /** When the backend was asked (ms). */
  at: number;
}

/**
 * A late heartbeat, checked with the backend before anyone fails the sandbox. The
 * step-dispatcher judges heartbeats but drives no backend (docs/services.md: only pod-lifecycle
 * and the reaper do), so it marks a sandbox whose heartbeat key expired as a *suspect*, and
 * pod-lifecycle, which owns the backend, answers with a verdict: running (a starved or paused
 * agent: given more time, within a bound) or gone (failed as lost at once).
 *
 * Keys (namespace-wide, any slot; no prefix in the default namespace): `<ns>:liveness:suspects` ZSET jobId → when its heartbeat was
 * first found missing (ms); `<ns>:liveness:verdicts` HASH jobId → `<state>:<at>`. A new suspect
 * is also published on `<ns>:liveness:suspected`, so pod-lifecycle asks its backend at once
 * instead of at its next idle round (up to seconds later): a lost sandbox is failed that much
 * sooner. Pub/sub keeps nothing for a subscriber that is away; its rounds still find the suspect.
 */
export class SandboxLiveness {
  private readonly suspectsKey: string;
  private readonly verdictsKey: string;
  private readonly suspectedChannel: string;

  constructor(
    private readonly redis: RedisClient,
    keys: KeySpace,
  ) {
    // As the KeySpace scopes its own names: the production namespace keeps the short ones.
    const prefix = keys.namespace === DEFAULT_NAMESPACE ? '' : `${keys.namespace}:`;
    this.suspectsKey = `${prefix}liveness:suspects`;
    this.verdictsKey = `${prefix}liveness:verdicts`;
    this.suspectedChannel = `${prefix}liveness:suspected`;
  }

  /** Marks the job suspect (once: the first miss is kept) and answers since when (ms). */
  async suspect(jobId: string, now = Date.now()): Promise<number> {
    const added = await this.redis.zadd(this.suspectsKey, 'NX', now, jobId);
    if (added === 1) await this.redis.publish(this.suspectedChannel, jobId);
    const since = await this.redis.zscore(this.suspectsKey, jobId);
    return since === null ? now : Number(since);
  }

  /**
   * Calls `onSuspect` whenever a job becomes suspect, heard on `subscriber` (a connection in
   * subscriber mode, which may carry other subscriptions). Resolves once Redis confirmed.
   */
  async listen(subscriber: RedisClient, onSuspect: () => void): Promise<void> {
    subscriber.on('message', (channel: string) => {
      if (channel === this.suspectedChannel) onSuspect();
    });
    await subscriber.subscribe(this.suspectedChannel);
  }

  /** No longer suspect (it beat again, or it ended). */
  async clear(...jobIds: string[]): Promise<void> {
    if (jobIds.length === 0) return;
    await this.redis.zrem(this.suspectsKey, ...jobIds);
    await this.redis.hdel(this.verdictsKey, ...jobIds);
  }

  /** Every suspect job. */
  suspects(): Promise<string[]> {
    return this.redis.zrange(this.suspectsKey, 0, -1);
  }

  async verdict(jobId: string): Promise<LivenessVerdict | undefined> {
    const raw = await this.redis.hget(this.verdictsKey, jobId);
    const match = raw ? /^(running|gone|unknown):(\d+)$/.exec(raw) : null;
    if (!match) return undefined;
    return { state: match[1] as LivenessVerdict['state'], at: Number(match[2]) };
  }

  /** pod-lifecycle's answer; written only while the job is still suspect. */
  async record(jobId: string, state: LivenessVerdict['state'], at = Date.now()): Promise<void> {
    if ((await this.redis.zscore(this.suspectsKey, jobId)) === null) return;
    await this.redis.hset(this.verdictsKey, jobId, `${state}:${at}`);
  }
}
