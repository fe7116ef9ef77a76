import { KeyStyleSchema } from '@sandstream/wire';
import type { Redis } from 'ioredis';
import { z } from 'zod';

/**
 * Where in-process sandboxes are recorded. A child process has no labels a second service
 * replica could query (unlike a container or a pod), and scanning /proc for an environment marker
 * only works for processes of the same user and says nothing about workspace paths or tenants.
 * One Redis HASH (field = job id) is readable by every replica, survives a restart of the process
 * that spawned the agent, and gives destroy() an O(1) lookup. The pid is stored with its kernel
 * start time so a reused pid is never mistaken for our agent.
 */
export const InProcessRecordSchema = z.object({
  jobId: z.string(),
  tenant: z.string(),
  pid: z.number().int().positive(),
  startTime: z.string().nullable(),
  hostname: z.string(),
  /** Per-job directory holding the agent log (and the workspace when it is temporary). */
  stateDir: z.string(),
  workspace: z.string(),
  persistentWorkspace: z.boolean(),
  keyStyle: KeyStyleSchema,
  labels: z.record(z.string(), z.string()),
  createdAt: z.string(),
  /** The disk limit (spec or SANDBOX_DEFAULT_DISK) the state directory is watched against. */
  diskLimitBytes: z.number().int().positive().optional(),
  /** Read-write volumes with a size limit: their directories, watched against it. */
  volumeLimits: z
    .array(z.object({ volume: z.string(), dir: z.string(), limitBytes: z.number().int().positive() }))
    .default([]),
});
export type InProcessRecord = z.infer<typeof InProcessRecordSchema>;

export const DEFAULT_INPROCESS_REGISTRY_KEY = 'sandstream:inprocess:sandboxes';

export class InProcessRegistry {
  constructor(
    private readonly redis: Redis,
    private readonly key = DEFAULT_INPROCESS_REGISTRY_KEY,
  ) {}

  async put(record: InProcessRecord): Promise<void> {
    await this.redis.hset(this.key, record.jobId, JSON.stringify(record));
  }

  async get(jobId: string): Promise<InProcessRecord | undefined> {
    const raw = await this.redis.hget(this.key, jobId);
    return raw === null ? undefined : this.decode(raw);
  }

  async remove(jobId: string): Promise<void> {
    await this.redis.hdel(this.key, jobId);
  }

  async all(): Promise<InProcessRecord[]> {
    const entries = await this.redis.hgetall(this.key);
    return Object.values(entries)
      .map((raw) => this.decode(raw))
      .filter((r): r is InProcessRecord => r !== undefined);
  }

  /** A record written by an incompatible version is skipped rather than crashing list(). */
  private decode(raw: string): InProcessRecord | undefined {
    try {
      const parsed = InProcessRecordSchema.safeParse(JSON.parse(raw));
      return parsed.success ? parsed.data : undefined;
    } catch {
      return undefined;
    }
  }
}
