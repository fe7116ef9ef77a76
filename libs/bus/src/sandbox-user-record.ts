import { z } from 'zod';
import type { KeySpace } from './key-space.js';
import { LuaScript } from './lua-script.js';
import type { RedisClient } from './redis-connection.js';

/**
 * What it takes to re-create a sandbox's Redis user after Redis lost it: kept in the job record
 * (field `sandboxUser`), which the AOF persists and no sandbox user can read. The password itself
 * is never stored, only its SHA-256, which `ACL SETUSER … #<hash>` accepts as it is.
 */
export const SandboxUserRecordSchema = z.object({
  username: z.string().min(1),
  notifyStream: z.string().min(1),
  passwordHash: z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex'),
});
export type SandboxUserRecord = z.infer<typeof SandboxUserRecordSchema>;

export const SANDBOX_USER_FIELD = 'sandboxUser';

// KEYS: job hash. ARGV: field, value. Never creates a record for a job that is gone.
const SET_ON_EXISTING = new LuaScript(
  'job-set-sandbox-user',
  `if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1`,
);

export async function saveSandboxUser(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
  record: SandboxUserRecord,
): Promise<boolean> {
  const value = JSON.stringify(SandboxUserRecordSchema.parse(record));
  return (await SET_ON_EXISTING.run<number>(redis, [keys.job(jobId)], [SANDBOX_USER_FIELD, value])) === 1;
}

/** The kept user of a job, or null (no record, no user kept, or an unreadable value). */
export async function readSandboxUser(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
): Promise<SandboxUserRecord | null> {
  const raw = await redis.hget(keys.job(jobId), SANDBOX_USER_FIELD);
  if (raw === null) return null;
  try {
    const parsed = SandboxUserRecordSchema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
