import { randomBytes } from 'node:crypto';
import {
  type KeySpace,
  type RedisClient,
  releaseLock,
  renewLock,
  snapshotFailure,
  tryLock,
} from '@sandstream/bus';
import type { SandboxBackend, SandboxRef } from '@sandstream/sandbox';
import type { Logger } from '@sandstream/telemetry';

const LEASE_MS = 30_000;

/**
 * A capture or restore freezes its sandbox; a pod-lifecycle killed mid-way would leave it frozen
 * (Docker paused, in-process stopped) for good. Each one holds a lease (short-lock, renewed) and
 * is listed in `snapshots.frozen`; any replica's sweep thaws a listed sandbox whose lease lapsed.
 * The lease also keeps two captures or restores of one sandbox from running at once.
 */
export class SnapshotFreezeGuard {
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: { redis: RedisClient; keys: KeySpace; backend: SandboxBackend; logger: Logger },
  ) {}

  private lease(sandboxId: string): string {
    return this.deps.keys.lock(`snapshot-freeze:${sandboxId}`);
  }

  /** Runs `work` holding the sandbox's lease; refused (conflict) while another holds it. */
  async hold<T>(sandboxId: string, ref: SandboxRef, work: () => Promise<T>): Promise<T> {
    const { redis, keys } = this.deps;
    const owner = randomBytes(8).toString('hex');
    if (!(await tryLock(redis, this.lease(sandboxId), LEASE_MS, owner)))
      throw snapshotFailure('conflict', `a snapshot or restore of sandbox ${sandboxId} is under way`);
    await redis.hset(keys.snapshots.frozen, sandboxId, JSON.stringify(ref));
    const renew = setInterval(() => {
      renewLock(redis, this.lease(sandboxId), LEASE_MS, owner).catch(() => {});
    }, LEASE_MS / 3);
    try {
      return await work();
    } finally {
      clearInterval(renew);
      await redis.hdel(keys.snapshots.frozen, sandboxId);
      await releaseLock(redis, this.lease(sandboxId), owner);
    }
  }

  /** Thaws every listed sandbox whose lease lapsed (its holder died). */
  async sweep(): Promise<number> {
    const { redis, keys, backend, logger } = this.deps;
    let thawed = 0;
    for (const [sandboxId, raw] of Object.entries(await redis.hgetall(keys.snapshots.frozen))) {
      if (await redis.exists(this.lease(sandboxId))) continue;
      const ref = JSON.parse(raw) as SandboxRef;
      if (ref.backend !== backend.kind) continue;
      await backend.thaw?.(ref);
      await redis.hdel(keys.snapshots.frozen, sandboxId);
      logger.warn({ sandbox: sandboxId }, 'thawed a sandbox a dead capture or restore left frozen');
      thawed++;
    }
    return thawed;
  }

  start(intervalMs = 10_000): void {
    this.sweeper = setInterval(() => {
      this.sweep().catch((err: Error) => this.deps.logger.warn({ err: err.message }, 'freeze sweep failed'));
    }, intervalMs);
    this.sweeper.unref();
  }

  stop(): void {
    clearInterval(this.sweeper);
  }
}
