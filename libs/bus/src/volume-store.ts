import { randomBytes } from 'node:crypto';
import { busLua } from './bus-lua.js';
import { isTerminal } from './job-state.js';
import type { JobStore } from './job-store.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';
import {
  type ResolvedVolumeMount,
  VOLUME_DEFAULT_SIZE_BYTES,
  type VolumeCreate,
  type VolumeInfo,
  type VolumeMount,
  type VolumeRecord,
  VolumeRecordSchema,
  volumeBackendName,
} from './volume-spec.js';

const CREATE = busLua.load('volume-create');
const ACQUIRE = busLua.load('volume-acquire');
const RELEASE = busLua.load('volume-release');
const DELETE = busLua.load('volume-delete');

/** A tenant's volume quota when the operator set none (VolumeStore.setQuota). */
export const DEFAULT_VOLUME_QUOTA = { maxCount: 20, maxBytes: 100 * 1024 ** 3 } as const;
export interface VolumeQuota {
  maxCount: number;
  maxBytes: number;
}

/**
 * A hold older than this whose sandbox has no job record is stale: the submit that took it died
 * before writing the record (holds are taken first, so a refused submit writes nothing).
 */
export const VOLUME_HOLD_RECORD_GRACE_MS = 60_000;

/** No volume of this name for this tenant (another tenant's is not found either). */
export class VolumeNotFoundError extends Error {
  override readonly name = 'VolumeNotFoundError';
  constructor(readonly volume: string) {
    super(`volume ${volume} not found`);
  }
}

/** A read-write mount, or a delete, of a volume a sandbox mounts. */
export class VolumeInUseError extends Error {
  override readonly name = 'VolumeInUseError';
  constructor(
    readonly volume: string,
    /** The sandbox (job id) that holds it. */
    readonly holder: string,
    message: string,
  ) {
    super(message);
  }
}

/** A create over the tenant's volume quota; `limit` names which. */
export class VolumeQuotaError extends Error {
  override readonly name = 'VolumeQuotaError';
  constructor(
    readonly limit: 'maxCount' | 'maxBytes',
    message: string,
  ) {
    super(message);
  }
}

/**
 * The one owner of volumes in Redis: records per tenant (quota checked in the create script),
 * holds (one writer, shared readers; taken all at once at submit, given back by the sandbox's
 * teardown), deletes (refused while held). Backend objects are made by the backend at the first
 * mount and removed by the reaper from the `deleted` list (docs/volumes.md).
 */
export class VolumeStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: KeySpace,
    /** Reads holders' job records to clear a hold whose sandbox is gone. */
    private readonly jobs?: Pick<JobStore, 'get'>,
  ) {}

  async create(tenant: string, request: VolumeCreate): Promise<{ volume: VolumeRecord; created: boolean }> {
    const record: VolumeRecord = {
      name: request.name,
      tenant,
      uid: randomBytes(8).toString('hex'),
      ...(request.sizeLimitBytes !== undefined ? { sizeLimitBytes: request.sizeLimitBytes } : {}),
      createdAt: new Date().toISOString(),
    };
    const counted = request.sizeLimitBytes ?? VOLUME_DEFAULT_SIZE_BYTES;
    const k = this.keys.volumes;
    const reply = await CREATE.run<string[]>(
      this.redis,
      [k.tenant(tenant), k.quota],
      [
        request.name,
        JSON.stringify({ ...record, countedBytes: counted }),
        counted,
        tenant,
        DEFAULT_VOLUME_QUOTA.maxCount,
        DEFAULT_VOLUME_QUOTA.maxBytes,
      ],
    );
    if (reply[0] === 'created') return { volume: record, created: true };
    if (reply[0] === 'exists')
      return { volume: VolumeRecordSchema.parse(JSON.parse(reply[1] as string)), created: false };
    if (reply[0] === 'count') {
      throw new VolumeQuotaError(
        'maxCount',
        `tenant ${tenant} has reached its volume quota: maxCount is ${reply[1]} volumes`,
      );
    }
    throw new VolumeQuotaError(
      'maxBytes',
      `volume ${request.name} (${counted} bytes${request.sizeLimitBytes === undefined ? ', the default size' : ''}) is over tenant ${tenant}'s volume quota: maxBytes is ${reply[1]}, ${reply[2]} in use`,
    );
  }

  async get(tenant: string, name: string): Promise<VolumeRecord | null> {
    const raw = await this.redis.hget(this.keys.volumes.tenant(tenant), name);
    return raw ? VolumeRecordSchema.parse(JSON.parse(raw)) : null;
  }

  async list(tenant: string): Promise<VolumeInfo[]> {
    const all = await this.redis.hgetall(this.keys.volumes.tenant(tenant));
    const names = Object.keys(all).sort();
    const holds = names.length
      ? await this.redis.hmget(this.keys.volumes.holds, ...names.map((n) => `${tenant}/${n}`))
      : [];
    return names.map((name, i) => ({
      ...VolumeRecordSchema.parse(JSON.parse(all[name] as string)),
      holders: holdersOf(holds[i] ?? null).map(({ sandboxId, readOnly }) => ({ sandboxId, readOnly })),
    }));
  }

  /** Refused while a sandbox mounts it (after clearing holds of sandboxes that are gone). */
  async delete(tenant: string, name: string): Promise<void> {
    const k = this.keys.volumes;
    for (let attempt = 0; ; attempt++) {
      const reply = await DELETE.run<string[]>(
        this.redis,
        [k.tenant(tenant), k.holds, k.deleted],
        [name, `${tenant}/${name}`],
      );
      if (reply[0] === 'deleted') return;
      if (reply[0] === 'missing') throw new VolumeNotFoundError(name);
      const holders = holdersOf(reply[1] as string);
      const cleared = attempt === 0 ? (await this.clearStale(holders)).gone : 0;
      if (cleared === 0) {
        const holder = holders[0]?.sandboxId ?? '';
        throw new VolumeInUseError(
          name,
          holder,
          `volume ${name} is in use by sandbox ${holders.map((h) => h.sandboxId).join(', ')}: close it first`,
        );
      }
    }
  }

  /**
   * Takes the holds a sandbox or job asks for, all or none (submit, before its record is written).
   * A refusal names the sandbox that writes to the volume; a holder whose job has ended or whose
   * record never came is cleared and the take tried again (a crash never leaves a volume locked).
   */
  async acquire(
    jobId: string,
    tenant: string,
    mounts: readonly VolumeMount[],
    now = Date.now(),
  ): Promise<void> {
    if (mounts.length === 0) return;
    const k = this.keys.volumes;
    const wants = JSON.stringify(mounts.map((m) => [m.name, m.readOnly]));
    for (let attempt = 0; ; attempt++) {
      const reply = await ACQUIRE.run<string[]>(
        this.redis,
        [k.tenant(tenant), k.holds, k.heldBy],
        [jobId, tenant, now, wants],
      );
      if (reply[0] === 'ok') return;
      const volume = reply[1] as string;
      if (reply[0] === 'missing') throw new VolumeNotFoundError(volume);
      const holder = reply[2] as string;
      const since = Number(reply[4]);
      if (attempt < 3 && (await this.clearStale([{ sandboxId: holder, since }])).gone > 0) continue;
      throw new VolumeInUseError(
        volume,
        holder,
        `volume ${volume} is mounted read-write by sandbox ${holder}: one writer at a time (mount it readOnly to share it, or close ${holder} first)`,
      );
    }
  }

  /** Gives back every hold of a sandbox (tearDownSandbox; idempotent). Returns how many. */
  async release(jobId: string): Promise<number> {
    const k = this.keys.volumes;
    return RELEASE.run<number>(this.redis, [k.holds, k.heldBy], [jobId]);
  }

  /** The backend's mounts for a spec's volumes (the scheduler, once the holds are taken). */
  async resolveMounts(tenant: string, mounts: readonly VolumeMount[]): Promise<ResolvedVolumeMount[]> {
    const out: ResolvedVolumeMount[] = [];
    for (const m of mounts) {
      const record = await this.get(tenant, m.name);
      if (!record) throw new VolumeNotFoundError(m.name);
      out.push({
        source: volumeBackendName(record.uid),
        volume: m.name,
        mountPath: m.mountPath,
        readOnly: m.readOnly,
        ...(record.sizeLimitBytes !== undefined ? { sizeLimitBytes: record.sizeLimitBytes } : {}),
      });
    }
    return out;
  }

  /** The reaper's pass: releases every hold whose sandbox's job has ended or never came. */
  async clearStaleHolds(now = Date.now()): Promise<number> {
    const held = await this.redis.hkeys(this.keys.volumes.heldBy);
    const holds = await this.redis.hvals(this.keys.volumes.holds);
    const since = new Map<string, number>();
    for (const raw of holds) for (const h of holdersOf(raw)) since.set(h.sandboxId, h.since);
    const { released } = await this.clearStale(
      held.map((sandboxId) => ({ sandboxId, since: since.get(sandboxId) ?? 0 })),
      now,
    );
    return released;
  }

  /** Backend names of deleted volumes, oldest first, for the reaper to remove. */
  async deletedBackendNames(count = 100): Promise<string[]> {
    const uids = await this.redis.lrange(this.keys.volumes.deleted, 0, count - 1);
    return uids.map(volumeBackendName);
  }

  /** The reaper removed the backend object of `uid`'s volume. */
  async forgetDeleted(backendName: string): Promise<void> {
    await this.redis.lrem(this.keys.volumes.deleted, 1, backendName.replace(/^sandstream-vol-/, ''));
  }

  async setQuota(tenant: string | '*', quota: VolumeQuota): Promise<void> {
    await this.redis.hset(this.keys.volumes.quota, tenant, JSON.stringify(quota));
  }

  /**
   * Releases the holds of holders that are gone (ended, or no record past the grace): `gone` is how
   * many were, `released` how many holds this call took. They differ when the ended sandbox's own
   * teardown released its hold between the caller's refusal and this look (a writer closed just
   * before the next one mounts): a take or a delete tries again on `gone`, not refuse on a hold
   * that is already free; the reaper counts what it `released`.
   */
  private async clearStale(
    holders: { sandboxId: string; since: number }[],
    now = Date.now(),
  ): Promise<{ gone: number; released: number }> {
    const cleared = { gone: 0, released: 0 };
    if (!this.jobs) return cleared;
    for (const { sandboxId, since } of holders) {
      const record = await this.jobs.get(sandboxId);
      const gone = record ? isTerminal(record.state) : now - since > VOLUME_HOLD_RECORD_GRACE_MS;
      if (!gone) continue;
      cleared.gone++;
      if ((await this.release(sandboxId)) > 0) cleared.released++;
    }
    return cleared;
  }
}

function holdersOf(raw: string | null): { sandboxId: string; readOnly: boolean; since: number }[] {
  if (!raw) return [];
  const parsed = JSON.parse(raw) as Record<string, { ro: boolean; at: number }>;
  return Object.entries(parsed).map(([sandboxId, h]) => ({ sandboxId, readOnly: h.ro, since: h.at }));
}
