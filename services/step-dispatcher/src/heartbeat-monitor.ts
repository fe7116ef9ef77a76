import {
  type DispatcherPresence,
  type DispatchKeys,
  type LivenessVerdict,
  type RedisClient,
  type SandboxLiveness,
  tryLock,
} from '@sandstream/bus';
import { pollUntil } from '@sandstream/poll';
import { AdaptiveTask } from '@sandstream/service-kit';
import type { Logger } from '@sandstream/telemetry';

/** Between two reads of a new suspect's verdict. */
const VERDICT_POLL_STEP_MS = 100;

export interface HeartbeatMonitorOptions {
  redis: RedisClient;
  keys: DispatchKeys;
  logger: Logger;
  /**
   * Called for a running job whose agent's heartbeat key has expired (and, with `liveness`, whose
   * sandbox the backend found gone, or silent too long); `detail` says which. `reason`, when the
   * check already knows why it is lost (its agent locked out), is the whole reason.
   */
  onLost: (jobId: string, detail?: string, reason?: string) => Promise<void>;
  /**
   * Tell a slow agent from a dead one: a late heartbeat makes the sandbox a suspect, and
   * pod-lifecycle (which owns the backend) answers whether it still runs. Absent, a missing
   * heartbeat fails the sandbox at once.
   */
  liveness?: {
    store: SandboxLiveness;
    /** Without a verdict (no pod-lifecycle answering) after this long, failed as before. */
    verdictWaitMs: number;
    /** A sandbox that runs but whose agent stays silent this long is failed all the same. */
    lateMaxMs: number;
    /**
     * Why the agent is lost when it is locked out (its Redis user is gone), else undefined: a
     * running sandbox then gets no more time, since its agent can never beat again.
     */
    lockedOut?: (jobId: string) => Promise<string | undefined>;
    /**
     * How long a round waits for the verdict on a sandbox it has just made suspect (default
     * 2 s). pod-lifecycle is woken by the new suspect and answers within a backend call, so the
     * verdict is usually there in a few hundred ms: a sandbox found gone is failed in this round
     * instead of the next one, a whole interval later.
     */
    verdictPollMs?: number;
  };
  intervalMs?: number;
  /** Jobs dispatched more recently than this are not judged yet. */
  graceMs?: number;
  /** EXISTS calls sent together; ioredis pipelines them (auto-pipelining) into few round trips. */
  chunkSize?: number;
  /**
   * After the connection to Redis is (re-)established, no heartbeat is judged for this long.
   * Heartbeat keys expire while Redis is down (or were never in a restored AOF), and the agents
   * need a moment to reconnect — and to get their Redis users back — before they beat again.
   */
  reconnectGraceMs?: number;
  /**
   * The job store's index of `running` jobs (score = when they went running). Jobs in it are
   * checked too, so a running job is ours to end even when the shard's running set lacks it.
   */
  runningIndexKey?: string;
  /** Stamped every round, so the reaper knows a dispatcher is alive (DispatcherPresence). */
  presence?: { presence: DispatcherPresence; instance: string };
  /** Called after every completed round (the loop is alive; see ProgressWatchdog). */
  onProgress?: () => void;
  /**
   * Whether any job runs (RunningProbe): while none does and the last check left nothing behind
   * (no candidate, no suspect), a round only stamps the presence.
   */
  anyRunning?: () => Promise<boolean>;
  /**
   * Longest pause while rounds only stamp the presence (nothing runs): default `intervalMs`. The
   * dispatcher gives its idle recheck, so the stamp rides the shared tick of its other idle loops.
   */
  idleMaxMs?: number;
}

/**
 * Checks the heartbeat keys of all running jobs on one timer, in batches, instead of watching
 * each agent separately. Only one instance checks per interval (a short SET NX lock); the rest
 * skip, so N replicas do not multiply the load. A missing key means the agent has not refreshed
 * it for its whole TTL: the sandbox is lost.
 */
export class HeartbeatMonitor {
  private readonly loop: AdaptiveTask;
  /** The last round only stamped the presence: the loop rests (up to idleMaxMs) until wake(). */
  private resting = false;
  private connectedAt = Date.now();
  private readonly onReady = () => {
    this.connectedAt = Date.now();
  };
  lastCheckedCount = 0;
  /** Aborted by stop(): a round waiting for a verdict stops waiting. */
  private readonly stopping = new AbortController();
  /** The last full check found no running job and no suspect: nothing to clean up while idle. */
  private lastCheckEmpty = false;

  constructor(private readonly options: HeartbeatMonitorOptions) {
    this.loop = new AdaptiveTask(
      async () => {
        await this.check();
        return this.resting ? 'idle' : 'busy';
      },
      {
        intervalMs: this.intervalMs,
        idleMaxMs: Math.max(this.intervalMs, options.idleMaxMs ?? this.intervalMs),
        name: 'heartbeat monitor',
        logger: options.logger,
        ...(options.onProgress ? { onProgress: options.onProgress } : {}),
      },
    );
  }

  /**
   * This process started a job: a resting loop checks now and keeps its pace from there, so a
   * job's agent is watched at `intervalMs` from its start, not after a rest. A no-op while the
   * loop keeps its pace (every start of a busy dispatcher).
   */
  noteRunning(): void {
    if (!this.resting) return;
    this.resting = false;
    this.loop.wake();
  }

  start(): void {
    this.options.redis.on('ready', this.onReady);
    this.loop.start();
  }

  private get intervalMs(): number {
    return this.options.intervalMs ?? 2_000;
  }

  /** Every running job of this namespace, however recently it started. */
  runningJobs(): Promise<string[]> {
    return this.candidates('+inf');
  }

  /** Jobs judged now: running for longer than the grace, from the shards' sets and the index. */
  private async candidates(olderThan: number | '+inf'): Promise<string[]> {
    const { redis, keys, runningIndexKey } = this.options;
    const reads = keys
      .allShards()
      .map((shard) => redis.zrangebyscore(keys.running(shard), '-inf', olderThan));
    if (runningIndexKey) reads.push(redis.zrangebyscore(runningIndexKey, '-inf', olderThan));
    return [...new Set((await Promise.all(reads)).flat())];
  }

  async check(): Promise<void> {
    const { redis, keys } = this.options;
    const presence = this.options.presence;
    // The stamp and the question whether anything runs leave in one write (auto-pipelining).
    const [, running] = await Promise.all([
      presence?.presence.stamp(presence.instance),
      this.lastCheckEmpty && this.options.anyRunning ? this.options.anyRunning() : true,
    ]);
    this.resting = !running;
    if (this.resting) return;
    const reconnectGraceMs = this.options.reconnectGraceMs ?? 15_000;
    if (Date.now() - this.connectedAt < reconnectGraceMs) return;
    if (!(await tryLock(redis, keys.lock('heartbeat-check'), Math.max(100, this.intervalMs - 100)))) return;
    const graceMs = this.options.graceMs ?? 3_000;
    const chunkSize = this.options.chunkSize ?? 500;
    const jobIds = await this.candidates(Date.now() - graceMs);
    const liveness = this.options.liveness;
    const suspects = new Set(liveness ? await liveness.store.suspects() : []);
    this.lastCheckEmpty = jobIds.length === 0 && suspects.size === 0;
    const cleared: string[] = [];
    let checked = 0;
    for (let i = 0; i < jobIds.length; i += chunkSize) {
      const chunk = jobIds.slice(i, i + chunkSize);
      const alive = await Promise.all(chunk.map((id) => redis.exists(keys.keySpace.sandbox(id).heartbeat)));
      checked += chunk.length;
      // The connection dropped while we read: what looked missing may just be unread.
      if (Date.now() - this.connectedAt < reconnectGraceMs) return;
      await Promise.all(
        chunk.map(async (jobId, j) => {
          const wasSuspect = suspects.delete(jobId);
          if (alive[j] === 1) {
            if (wasSuspect) cleared.push(jobId);
            return;
          }
          try {
            const judged = liveness ? await this.judge(jobId, liveness) : { lost: undefined };
            if (judged === 'wait') return;
            await this.options.onLost(jobId, judged.lost, judged.reason);
            if (liveness) await liveness.store.clear(jobId);
          } catch (err) {
            this.options.logger.error({ err, jobId }, 'failing a lost sandbox failed; retried next round');
          }
        }),
      );
    }
    // Suspects that beat again, and those no longer running at all (ended, failed elsewhere).
    if (liveness) await liveness.store.clear(...cleared, ...suspects);
    for (const jobId of [...cleared, ...suspects]) this.late.delete(jobId);
    this.lastCheckedCount = checked;
  }

  /** Sandboxes already logged as late but running, so the log says it once per episode. */
  private readonly late = new Set<string>();

  /**
   * A missing heartbeat, weighed with what pod-lifecycle found on the backend: gone → lost now;
   * running → more time, up to lateMaxMs of silence; no answer → lost after verdictWaitMs, as
   * before there was a backend check.
   */
  private async judge(
    jobId: string,
    liveness: NonNullable<HeartbeatMonitorOptions['liveness']>,
  ): Promise<'wait' | { lost: string | undefined; reason?: string }> {
    const now = Date.now();
    const since = await liveness.store.suspect(jobId, now);
    // `since` is `now` exactly when this call made the job suspect.
    const verdict = await this.verdictSince(jobId, since, since === now, liveness);
    const silentSeconds = Math.round((now - since) / 1000);
    if (verdict === 'gone') return { lost: 'its sandbox no longer runs' };
    if (verdict === 'running') {
      // The missing user is the whole reason, handed on so the dispatcher need not ask again.
      const lockedOut = await liveness.lockedOut?.(jobId);
      if (lockedOut) return { lost: undefined, reason: lockedOut };
      if (now - since < liveness.lateMaxMs) {
        if (!this.late.has(jobId)) {
          this.late.add(jobId);
          this.options.logger.warn(
            { jobId },
            'agent heartbeat late but its sandbox runs (starved?); given more time',
          );
        }
        return 'wait';
      }
      return {
        lost: `its sandbox still runs, but the agent has been silent for ${silentSeconds} s past its heartbeat TTL (hung or starved)`,
      };
    }
    if (now - since < liveness.verdictWaitMs) return 'wait';
    return {
      lost:
        verdict === 'unknown'
          ? 'the backend could not tell whether its sandbox still runs'
          : `no pod-lifecycle confirmed within ${silentSeconds} s that its sandbox still runs`,
    };
  }

  /** pod-lifecycle's verdict given since `since`; for a new suspect, awaited for a moment. */
  private async verdictSince(
    jobId: string,
    since: number,
    isNew: boolean,
    liveness: NonNullable<HeartbeatMonitorOptions['liveness']>,
  ): Promise<LivenessVerdict['state'] | undefined> {
    const given = async () => {
      const found = await liveness.store.verdict(jobId);
      return found && found.at >= since ? found.state : undefined;
    };
    if (!isNew) return given();
    // A stop ends the wait: the round ends as without a verdict.
    return pollUntil(given, {
      deadline: Date.now() + (liveness.verdictPollMs ?? 2_000),
      signal: this.stopping.signal,
      initialIntervalMs: VERDICT_POLL_STEP_MS,
      maxIntervalMs: VERDICT_POLL_STEP_MS,
    }).catch((err: unknown) => {
      if (this.stopping.signal.aborted) return undefined;
      throw err;
    });
  }

  stop(): Promise<void> {
    this.stopping.abort();
    this.options.redis.off('ready', this.onReady);
    return this.loop.stop();
  }
}
