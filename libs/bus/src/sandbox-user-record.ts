import { z } from 'zod';
import { busLua } from './bus-lua.js';
import { JobField } from './job-layout.js';
import type { KeySpace } from './key-space.js';
import type { RedisClient } from './redis-connection.js';

/**
 * What it takes to re-create a sandbox's Redis user after Redis lost it: kept in the job record
 * (field `sandboxUser`, job-layout.ts), which the AOF persists and no sandbox user can read. The
 * password itself is never stored, only its SHA-256, which `ACL SETUSER … #<hash>` accepts as it is.
 */
export const SandboxUserRecordSchema = z.object({
  username: z.string().min(1),
  notifyStream: z.string().min(1),
  passwordHash: z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex'),
});
export type SandboxUserRecord = z.infer<typeof SandboxUserRecordSchema>;

export const SANDBOX_USER_FIELD = JobField.sandboxUser;

/** Never creates a record for a job that is gone. */
const SET_IF_EXISTS = busLua.load('job-set-if-exists');

export async function saveSandboxUser(
  redis: RedisClient,
  keys: KeySpace,
  jobId: string,
  record: SandboxUserRecord,
): Promise<boolean> {
  const value = JSON.stringify(SandboxUserRecordSchema.parse(record));
  return (await SET_IF_EXISTS.run<number>(redis, [keys.job(jobId)], [SANDBOX_USER_FIELD, value])) === 1;
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
