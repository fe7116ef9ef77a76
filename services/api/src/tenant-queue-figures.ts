import { busLua, luaDir, type RedisClient, tenantTag } from '@sandstream/bus';
import type { Queue } from 'bullmq';
import { z } from 'zod';

const BY_TENANT = busLua.extend(luaDir(import.meta.url)).load('queue-entries-by-tenant');

/** Members read by one script call: a slice keeps each call short on a long queue. */
const SLICE = 1000;
/** How long one count of every tenant serves this replica's requests. */
const FRESH_MS = 2000;

export const QueueFigures = z.object({
  name: z.string(),
  waiting: z.number(),
  active: z.number(),
  delayed: z.number(),
  prioritized: z.number(),
  completed: z.number(),
  failed: z.number(),
});
export type QueueFigures = z.infer<typeof QueueFigures>;

type Figure = Exclude<keyof QueueFigures, 'name'>;
const FIGURES: Figure[] = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed'];

/** Every tenant's figures of a queue (for admin keys): BullMQ's own counts. */
export async function allFigures(queue: Queue): Promise<QueueFigures> {
  const counts = await queue.getJobCounts(...FIGURES);
  return { name: queue.name, ...Object.fromEntries(FIGURES.map((f) => [f, counts[f] ?? 0])) } as QueueFigures;
}

/** tenant tag → figure → count, for one queue. */
type ByTenant = Map<string, Record<Figure, number>>;

/**
 * Queue figures of one tenant. BullMQ counts a queue's entries, not whose they are; every queue
 * names its entries bullJobId(internal job id) and a tenant's internal ids carry its tag
 * (libs/bus tenant-ids.ts), so the entries are counted by tag in Redis
 * (`lua/queue-entries-by-tenant-1.lua`: no id leaves Redis), a slice of 1,000 per call so Redis
 * is never held long. One count of every tenant serves this replica's requests for 2 s, so its
 * cost does not grow with callers; it grows with the queues' entries, which their bounded
 * history bounds (DefaultJobOptions). A count is a sum of slices read one after another, as
 * fresh as BullMQ's own figures are between two reads.
 */
export class TenantQueueFigures {
  private last: { at: number; counts: Promise<ByTenant[]> } | undefined;

  constructor(
    private readonly redis: RedisClient,
    private readonly queues: readonly Queue[],
  ) {}

  async of(tenant: string): Promise<QueueFigures[]> {
    const now = Date.now();
    if (!this.last || now - this.last.at >= FRESH_MS) {
      const counts = Promise.all(this.queues.map((q) => this.count(q)));
      this.last = { at: now, counts };
      // A failed count is not kept: the next request tries again.
      counts.catch(() => {
        if (this.last?.counts === counts) this.last = undefined;
      });
    }
    const tag = tenantTag(tenant);
    return (await this.last.counts).map((byTenant, i) => ({
      name: this.queues[i]?.name ?? '',
      ...(byTenant.get(tag) ?? zero()),
    }));
  }

  private async count(queue: Queue): Promise<ByTenant> {
    const k = queue.keys;
    const states: [Figure, string | undefined, 'list' | 'zset'][] = [
      ['waiting', k.wait, 'list'],
      ['waiting', k.paused, 'list'],
      ['active', k.active, 'list'],
      ['delayed', k.delayed, 'zset'],
      ['prioritized', k.prioritized, 'zset'],
      ['completed', k.completed, 'zset'],
      ['failed', k.failed, 'zset'],
    ];
    const byTenant: ByTenant = new Map();
    for (const [figure, key, type] of states) {
      if (key === undefined) continue;
      for (let start = 0; ; start += SLICE) {
        const reply = await BY_TENANT.run<(string | number)[]>(
          this.redis,
          [key],
          [type, start, start + SLICE - 1],
        );
        for (let i = 1; i + 1 < reply.length; i += 2) {
          const tag = String(reply[i]);
          const counts = byTenant.get(tag) ?? zero();
          counts[figure] += Number(reply[i + 1]);
          byTenant.set(tag, counts);
        }
        if (Number(reply[0]) < SLICE) break;
      }
    }
    return byTenant;
  }
}

function zero(): Record<Figure, number> {
  return { waiting: 0, active: 0, delayed: 0, prioritized: 0, completed: 0, failed: 0 };
}
