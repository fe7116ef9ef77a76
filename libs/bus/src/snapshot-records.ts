import { z } from 'zod';
import { busLua } from './bus-lua.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

const BEGIN = busLua.load('snapshot-begin');
const COMMIT = busLua.load('snapshot-commit');
const DELETE = busLua.load('snapshot-delete');

import { SnapshotIdSchema } from './snapshot-id.js';

export { newSnapshotId, SnapshotIdSchema } from './snapshot-id.js';

/** A snapshot as the SDK, the CLI and the API show it. */
export const SnapshotRecordSchema = z.object({
  snapshotId: SnapshotIdSchema,
  tenant: z.string(),
  name: z.string().optional(),
  /** The sandbox it was taken of. */
  fromSandbox: z.string(),
  /** That sandbox's spec: a create from the snapshot starts from it (same image). */
  spec: z.record(z.string(), z.unknown()),
  /** The backend that took it (`docker` snapshots hold a container layer, restored on Docker only). */
  backend: z.string(),
  /** `uploading` until its bytes are stored; only `ready` ones are listed. */
  state: z.enum(['uploading', 'ready']),
  /** Stored (compressed) bytes. */
  sizeBytes: z.number().int().min(0),
  sha256: z.string().optional(),
  entries: z.number().int().min(0).optional(),
  /** How long the sandbox's processes were frozen for the capture. */
  frozenMs: z.number().min(0).optional(),
  createdAt: z.number(),
  expiresAt: z.number(),
});
export type SnapshotRecord = z.infer<typeof SnapshotRecordSchema>;

/** Per-tenant quotas and retention (pod-lifecycle's env: SNAPSHOT_*). */
export interface SnapshotLimits {
  maxCount: number;
  maxBytes: number;
  retentionMs: number;
  /** How long an upload may stay unfinished before the reaper takes it for a dead one. */
  uploadGraceMs: number;
}

export const DEFAULT_SNAPSHOT_LIMITS: SnapshotLimits = {
  maxCount: 100,
  maxBytes: 20 * 1024 ** 3,
  retentionMs: 7 * 24 * 3600_000,
  uploadGraceMs: 15 * 60_000,
};

/** A tenant's snapshot quota refused a snapshot; `limit` names which (`count` or `bytes`). */
export class SnapshotLimitError extends Error {
  override readonly name = 'SnapshotLimitError';
  constructor(
    readonly limit: 'count' | 'bytes',
    readonly max: number,
    readonly current: number,
  ) {
    super(
      limit === 'count'
        ? `snapshot quota: the tenant holds ${current} snapshots, at most ${max} (SNAPSHOT_MAX_COUNT_PER_TENANT); delete some first`
        : `snapshot quota: the tenant's snapshots and paused sandboxes' kept files would hold ${current} bytes, at most ${max} (SNAPSHOT_MAX_BYTES_PER_TENANT); delete snapshots, or resume or close paused sandboxes, first`,
    );
  }
}

/**
 * Snapshot records in Redis: begin (reserve against the quota, `uploading`), commit (`ready`,
 * listed), delete. The bytes live in the object store (SnapshotStore); an upload that never
 * commits stays unlisted and the reaper deletes it after its grace (`expired`).
 */
export class SnapshotRecords {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
  ) {}

  async begin(
    record: Omit<SnapshotRecord, 'state' | 'sizeBytes' | 'expiresAt'>,
    limits: SnapshotLimits,
  ): Promise<void> {
    const k = this.keys.snapshots;
    const expiresAt = Date.now() + limits.uploadGraceMs;
    // Owner and expiry first (other slots): a crash after them leaves an entry the reaper clears.
    await this.redis.hset(k.owners, record.snapshotId, record.tenant);
    await this.redis.zadd(k.expiry, expiresAt, `${record.tenant}/${record.snapshotId}`);
    const fields = flatten({ ...record, state: 'uploading', sizeBytes: 0, expiresAt });
    const [status, limit, max, current] = await BEGIN.run<string[]>(
      this.redis,
      [k.record(record.tenant, record.snapshotId), k.usage(record.tenant)],
      [String(limits.maxCount), String(limits.maxBytes), ...fields],
    );
    if (status === 'limit') {
      await this.forget(record.tenant, record.snapshotId);
      throw new SnapshotLimitError(limit as 'count' | 'bytes', Number(max), Number(current));
    }
    if (status !== 'ok') throw new Error(`snapshot ${record.snapshotId} already exists`);
  }

  /**
   * The upload is stored: `ready` (listed) if its bytes fit the quota, else dropped with
   * SnapshotLimitError. A `temporary` one (a fork's: pod-lifecycle drops it once the forks have
   * their files) is not listed, and expires one upload grace after this commit rather than after
   * the retention, so the reaper takes it should its dropper die.
   */
  async commit(
    tenant: string,
    snapshotId: string,
    stored: { sizeBytes: number; sha256: string; entries: number; frozenMs: number },
    limits: SnapshotLimits,
    options: { temporary?: boolean } = {},
  ): Promise<SnapshotRecord> {
    const k = this.keys.snapshots;
    const createdAt = Date.now();
    const expiresAt = createdAt + (options.temporary ? limits.uploadGraceMs : limits.retentionMs);
    const [status, , max, current] = await COMMIT.run<string[]>(
      this.redis,
      [k.record(tenant, snapshotId), k.usage(tenant), k.index(tenant)],
      [
        String(limits.maxBytes),
        String(stored.sizeBytes),
        String(createdAt),
        options.temporary ? '0' : '1',
        ...flatten({
          sha256: stored.sha256,
          entries: stored.entries,
          frozenMs: stored.frozenMs,
          createdAt,
          expiresAt,
        }),
      ],
    );
    if (status === 'limit') {
      await this.forget(tenant, snapshotId);
      throw new SnapshotLimitError('bytes', Number(max), Number(current));
    }
    if (status !== 'ok') throw new Error(`snapshot ${snapshotId} was removed while it was uploaded`);
    await this.redis.zadd(k.expiry, expiresAt, `${tenant}/${snapshotId}`);
    const record = await this.get(snapshotId, tenant);
    if (!record) throw new Error(`snapshot ${snapshotId} was removed while it was uploaded`);
    return record;
  }

  /**
   * A complete snapshot, or null: unknown id, another tenant's (`tenant` given and not the
   * owner: the same answer, so ids cannot be probed), or an upload still under way.
   */
  async get(snapshotId: string, tenant?: string): Promise<SnapshotRecord | null> {
    const record = await this.read(snapshotId, tenant);
    return record?.state === 'ready' ? record : null;
  }

  /** The record in any state (the reaper, the uploader). */
  async read(snapshotId: string, tenant?: string): Promise<SnapshotRecord | null> {
    if (!SnapshotIdSchema.safeParse(snapshotId).success) return null;
    const owner = tenant ?? (await this.redis.hget(this.keys.snapshots.owners, snapshotId));
    if (!owner) return null;
    const raw = await this.redis.hgetall(this.keys.snapshots.record(owner, snapshotId));
    if (!raw.snapshotId) return null;
    const parsed = SnapshotRecordSchema.safeParse(unflatten(raw));
    return parsed.success ? parsed.data : null;
  }

  /** Complete snapshots, newest first: one tenant's, or every tenant's when `tenant` is unset. */
  async list(tenant?: string, limit = 1000): Promise<SnapshotRecord[]> {
    const tenants = tenant
      ? [tenant]
      : [...new Set(Object.values(await this.redis.hgetall(this.keys.snapshots.owners)))];
    const out: SnapshotRecord[] = [];
    for (const t of tenants) {
      const ids = await this.redis.zrevrange(this.keys.snapshots.index(t), 0, limit - 1);
      for (const id of ids) {
        const record = await this.get(id, t);
        if (record) out.push(record);
      }
    }
    return out.sort((a, b) => b.createdAt - a.createdAt).slice(0, limit);
  }

  /** Removes the record (any state); the caller deletes the stored bytes. False when there was none. */
  async delete(snapshotId: string, tenant?: string): Promise<boolean> {
    const record = await this.read(snapshotId, tenant);
    if (!record) return false;
    await this.forget(record.tenant, snapshotId);
    return true;
  }

  /** Removes whatever is recorded of the id under `tenant` (record, index, owner, expiry entry); idempotent. */
  purge(tenant: string, snapshotId: string): Promise<void> {
    return this.forget(tenant, snapshotId);
  }

  /** `{tenant, snapshotId}` of records whose retention or upload grace ended before `now`. */
  async expired(now: number, count = 100): Promise<Array<{ tenant: string; snapshotId: string }>> {
    const members = await this.redis.zrangebyscore(this.keys.snapshots.expiry, 0, now, 'LIMIT', 0, count);
    return members.map((m) => {
      const slash = m.indexOf('/');
      return { tenant: m.slice(0, slash), snapshotId: m.slice(slash + 1) };
    });
  }

  private async forget(tenant: string, snapshotId: string): Promise<void> {
    const k = this.keys.snapshots;
    await DELETE.run(
      this.redis,
      [k.record(tenant, snapshotId), k.usage(tenant), k.index(tenant)],
      [snapshotId],
    );
    await this.redis.zrem(k.expiry, `${tenant}/${snapshotId}`);
    await this.redis.hdel(k.owners, snapshotId);
  }
}

function flatten(record: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(record)) {
    if (value === undefined) continue;
    out.push(key, typeof value === 'string' ? value : JSON.stringify(value));
  }
  return out;
}

const NUMERIC = new Set(['sizeBytes', 'entries', 'frozenMs', 'createdAt', 'expiresAt']);
function unflatten(raw: Record<string, string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (NUMERIC.has(key)) out[key] = Number(value);
    else if (key === 'spec') out[key] = JSON.parse(value);
    else out[key] = value;
  }
  return out;
}
