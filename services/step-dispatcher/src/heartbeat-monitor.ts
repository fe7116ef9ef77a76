import type { DispatchKeys, RedisClient } from '@sandstream/bus';
import type { Logger } from '@sandstream/telemetry';
import { sandboxKeys } from '@sandstream/wire';
import { PeriodicTask } from './periodic-task.js';

export interface HeartbeatMonitorOptions {
  redis: RedisClient;
  keys: DispatchKeys;
  logger: Logger;
  /** Called for a running job whose agent's heartbeat key has expired. */
  onLost: (jobId: string) => Promise<void>;
  intervalMs?: number;
  /** Jobs dispatched more recently than this are not judged yet. */
  graceMs?: number;
  /** EXISTS calls sent together; ioredis pipelines them (auto-pipelining) into few round trips. */
  chunkSize?: number;
}

/**
 * Checks the heartbeat keys of all running jobs on one timer, in batches, instead of watching
 * each agent separately. Only one instance checks per interval (a short SET NX lock); the rest
 * skip, so N replicas do not multiply the load. A missing key means the agent has not refreshed
 * it for its whole TTL: the sandbox is lost.
 */
export class HeartbeatMonitor {
  private readonly loop: PeriodicTask;
  lastCheckedCount = 0;

  constructor(private readonly options: HeartbeatMonitorOptions) {
    this.loop = new PeriodicTask(() => this.check(), this.intervalMs);
  }

  start(): void {
    this.loop.start();
  }

  private get intervalMs(): number {
    return this.options.intervalMs ?? 2_000;
  }

  async check(): Promise<void> {
    const { redis, keys, logger } = this.options;
    const lock = await redis.set(
      keys.lock('heartbeat-check'),
      '1',
      'PX',
      Math.max(100, this.intervalMs - 100),
      'NX',
    );
    if (lock !== 'OK') return;
    const graceMs = this.options.graceMs ?? 3_000;
    const chunkSize = this.options.chunkSize ?? 500;
    let checked = 0;
    for (const shard of keys.allShards()) {
      let jobIds: string[];
      try {
        jobIds = await redis.zrangebyscore(keys.running(shard), '-inf', Date.now() - graceMs);
      } catch (err) {
        logger.warn({ err }, 'reading running jobs failed');
        continue;
      }
      for (let i = 0; i < jobIds.length; i += chunkSize) {
        const chunk = jobIds.slice(i, i + chunkSize);
        const alive = await Promise.all(chunk.map((id) => redis.exists(sandboxKeys(id, 'tagged').heartbeat)));
        checked += chunk.length;
        await Promise.all(
          chunk.map(async (jobId, j) => {
            if (alive[j] === 1) return;
            try {
              await this.options.onLost(jobId);
            } catch (err) {
              logger.error({ err, jobId }, 'failing a lost sandbox failed; retried next round');
            }
          }),
        );
      }
    }
    this.lastCheckedCount = checked;
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
