import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { TenantSchema } from './job-spec.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

/**
 * API keys of the HTTP API, one tenant each (an admin key sees every tenant). A key is
 * `sk_<id>_<secret>`: the id finds its record in one HGET, and only the SHA-256 of the whole key
 * is stored, so a Redis dump reveals no usable key. Created by the CLI (which reaches Redis
 * directly: that is how the first admin key comes to exist), checked by every API replica.
 */
export const ApiKeyIdSchema = z.string().regex(/^[a-f0-9]{16}$/, 'an API key id is 16 hex digits');

export const ApiKeyRecordSchema = z.object({
  id: ApiKeyIdSchema,
  tenant: TenantSchema,
  admin: z.boolean(),
  createdAt: z.number().int(),
  /** SHA-256 (hex) of the whole key. */
  hash: z.string().regex(/^[a-f0-9]{64}$/),
});
export type ApiKeyRecord = z.infer<typeof ApiKeyRecordSchema>;

/** A key's record as listed: everything but its hash. */
export type ApiKeyInfo = Omit<ApiKeyRecord, 'hash'>;

const KEY_PATTERN = /^sk_([a-f0-9]{16})_([A-Za-z0-9_-]{43})$/;

function sha256(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** The pub/sub channel a revoked key's id is published on (ApiKeyStore.revoke). */
export function apiKeyRevocations(keys: KeySpace): string {
  return `${keys.apiKeys}:revoked`;
}

export class ApiKeyStore {
  constructor(private readonly ctx: { redis: RedisClient; keys: KeySpace }) {}

  /** A new key for `tenant`; the key itself is returned once and never stored. */
  async create(input: { tenant: string; admin?: boolean }): Promise<{ key: string; info: ApiKeyInfo }> {
    const tenant = TenantSchema.parse(input.tenant);
    const id = randomBytes(8).toString('hex');
    const key = `sk_${id}_${randomBytes(32).toString('base64url')}`;
    const record: ApiKeyRecord = {
      id,
      tenant,
      admin: input.admin === true,
      createdAt: Date.now(),
      hash: sha256(key).toString('hex'),
    };
    await this.ctx.redis.hset(this.ctx.keys.apiKeys, id, JSON.stringify(record));
    const { hash: _hash, ...info } = record;
    return { key, info };
  }

  /**
   * Registers a key made elsewhere (a deployment's secret: the first admin key of a cluster whose
   * Redis no operator reaches with the CLI). Idempotent: a key already registered under its id is
   * left as it is, so replicas starting together agree and a revoked id is never re-created by a
   * stale secret unless it is gone from Redis. Returns whether it was added.
   */
  async register(key: string, input: { tenant: string; admin?: boolean }): Promise<boolean> {
    const match = KEY_PATTERN.exec(key);
    if (!match) throw new Error('the key must look like sk_<16 hex digits>_<43 base64url characters>');
    const id = match[1] as string;
    const record: ApiKeyRecord = {
      id,
      tenant: TenantSchema.parse(input.tenant),
      admin: input.admin === true,
      createdAt: Date.now(),
      hash: sha256(key).toString('hex'),
    };
    return (await this.ctx.redis.hsetnx(this.ctx.keys.apiKeys, id, JSON.stringify(record))) === 1;
  }

  /** The key's record when it is well formed, known and not revoked; else null. */
  async verify(key: string): Promise<ApiKeyInfo | null> {
    const match = KEY_PATTERN.exec(key);
    if (!match) return null;
    const record = await this.read(match[1] as string);
    if (!record) return null;
    const stored = Buffer.from(record.hash, 'hex');
    if (!timingSafeEqual(stored, sha256(key))) return null;
    const { hash: _hash, ...info } = record;
    return info;
  }

  async list(): Promise<ApiKeyInfo[]> {
    const all = await this.ctx.redis.hgetall(this.ctx.keys.apiKeys);
    const infos: ApiKeyInfo[] = [];
    for (const raw of Object.values(all)) {
      const record = parseRecord(raw);
      if (!record) continue;
      const { hash: _hash, ...info } = record;
      infos.push(info);
    }
    return infos.sort((a, b) => a.createdAt - b.createdAt);
  }

  /**
   * Whether a key with this id existed (it is gone either way). Every API replica is told on
   * apiKeyRevocations(keys): they keep verified keys a few seconds, and drop this one at once.
   */
  async revoke(id: string): Promise<boolean> {
    const existed = (await this.ctx.redis.hdel(this.ctx.keys.apiKeys, id)) === 1;
    await this.ctx.redis.publish(apiKeyRevocations(this.ctx.keys), id);
    return existed;
  }

  private async read(id: string): Promise<ApiKeyRecord | null> {
    const raw = await this.ctx.redis.hget(this.ctx.keys.apiKeys, id);
    return raw === null ? null : parseRecord(raw);
  }
}

function parseRecord(raw: string): ApiKeyRecord | null {
  try {
    const parsed = ApiKeyRecordSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
