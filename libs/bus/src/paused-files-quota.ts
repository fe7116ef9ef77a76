import { busLua } from './bus-lua.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';
import { SnapshotLimitError } from './snapshot-records.js';

const HOLD = busLua.load('paused-files-hold');
const RELEASE = busLua.load('paused-files-release');

/**
 * A paused sandbox's kept files are a snapshot in all but name (same capture, same store), so
 * they count in its tenant's snapshot bytes (SNAPSHOT_MAX_BYTES_PER_TENANT): counted once per
 * stored object when it is stored, given back when it is deleted (a resume, a close, the
 * reaper), both idempotent. A pause already under way is never dropped for the quota (its files
 * would be lost): its bytes are counted even past the limit, and a pause asked while the tenant
 * is at its limit is refused up front (pauseRefusal), the sandbox left running.
 */
export class PausedFilesQuota {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
  ) {}

  async hold(tenant: string, objectId: string, sizeBytes: number): Promise<void> {
    await HOLD.run(this.redis, [this.keys.snapshots.usage(tenant)], [objectId, String(sizeBytes)]);
  }

  async release(tenant: string, objectId: string): Promise<void> {
    await RELEASE.run(this.redis, [this.keys.snapshots.usage(tenant)], [objectId]);
  }

  /** Publishes the quota pod-lifecycle enforces, so a pause request can check it before anything stops. */
  async publishLimits(limits: { maxCount: number; maxBytes: number }): Promise<void> {
    await this.redis.hset(this.keys.snapshots.limits, {
      maxCount: String(limits.maxCount),
      maxBytes: String(limits.maxBytes),
    });
  }

  /** The refusal of a pause of `tenant`'s sandbox when its snapshot bytes are at the limit already, else undefined. */
  async pauseRefusal(tenant: string): Promise<SnapshotLimitError | undefined> {
    const [max] = await this.redis.hmget(this.keys.snapshots.limits, 'maxBytes');
    if (max === null || max === undefined) return undefined;
    const [bytes, paused] = await this.redis.hmget(this.keys.snapshots.usage(tenant), 'bytes', 'pausedBytes');
    const current = Number(bytes ?? 0) + Number(paused ?? 0);
    return current >= Number(max) ? new SnapshotLimitError('bytes', Number(max), current) : undefined;
  }
}
