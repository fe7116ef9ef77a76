import type { DispatchKeys, RedisClient } from '@sandstream/bus';

/** How late into a tick a loop's question may come (a loaded event loop, the rounds before it). */
const TICK_SLACK_MS = 500;

export interface RunningProbeOptions {
  redis: RedisClient;
  keys: DispatchKeys;
  /** The job store's index of running jobs (HeartbeatMonitor reads it too). */
  runningIndexKey: string;
  /** How long an answer "nothing runs" is trusted (default 5 s). */
  idleRecheckMs?: number;
  /** How long an answer "something runs" is trusted (default 2 s). */
  busyRecheckMs?: number;
}

/**
 * Whether any job of this namespace runs: the loops that only ever look at running jobs (the Redis
 * budget and rate monitors, the heartbeat check) rest while none does, instead of reading Redis
 * several times a second for nothing (issue 32: an idle dispatcher spent ~6 ms of CPU a second on
 * `INFO` alone). One round of ZCARDs (the shards' running sets and the index, auto-pipelined) at
 * most every `idleRecheckMs` while idle; a job this process starts says so at once (noteRunning),
 * so its sandbox is watched from its first step; one started by another instance is seen within
 * `idleRecheckMs` here, and is watched meanwhile by that instance's own loops.
 */
export class RunningProbe {
  private known: { running: boolean; at: number } | undefined;
  private reading: Promise<boolean> | undefined;

  constructor(private readonly options: RunningProbeOptions) {}

  /** This process started a job or a live sandbox. */
  noteRunning(): void {
    this.known = { running: true, at: Date.now() };
  }

  async anyRunning(): Promise<boolean> {
    const known = this.known;
    const trustMs = known?.running
      ? (this.options.busyRecheckMs ?? 2000)
      : (this.options.idleRecheckMs ?? 5000);
    // Less a little: the loops that ask rest on a shared tick exactly idleRecheckMs apart, and an
    // answer read a few ms into the last tick must not be trusted through this one (that would
    // read every other tick, and see another instance's job only after twice the recheck).
    if (known && Date.now() - known.at < trustMs - TICK_SLACK_MS) return known.running;
    // Callers at the same moment share one read.
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async read(): Promise<boolean> {
    const { redis, keys, runningIndexKey } = this.options;
    const at = Date.now();
    const counts = await Promise.all([
      ...keys.allShards().map((shard) => redis.zcard(keys.running(shard))),
      redis.zcard(runningIndexKey),
    ]);
    const running = counts.some((n) => n > 0);
    // A noteRunning() during the read is newer than what the read saw.
    if (!this.known || this.known.at <= at) this.known = { running, at };
    return this.known.running;
  }
}
