import { bullJobId, busLua, luaDir, type RedisClient, tenantIdPrefix } from '@sandstream/bus';
import type { Queue } from 'bullmq';
import { z } from 'zod';

const COUNTS = busLua.extend(luaDir(import.meta.url)).load('queue-tenant-counts');

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

/** Every tenant's figures of a queue (for admin keys): BullMQ's own counts. */
export async function allFigures(queue: Queue): Promise<QueueFigures> {
  const counts = await queue.getJobCounts(
    'waiting',
    'active',
    'delayed',
    'prioritized',
    'completed',
    'failed',
  );
  return {
    name: queue.name,
    waiting: counts.waiting ?? 0,
    active: counts.active ?? 0,
    delayed: counts.delayed ?? 0,
    prioritized: counts.prioritized ?? 0,
    completed: counts.completed ?? 0,
    failed: counts.failed ?? 0,
  };
}

/**
 * One tenant's figures of a queue: its entries are told apart by their ids (every queue names
 * its entries bullJobId(internal job id), and a tenant's internal ids carry its prefix), counted
 * in Redis by one script per queue (`lua/queue-tenant-counts-7.lua`), so no entry and no other
 * tenant's id leaves Redis. It reads every entry of the queue: the queues' history is bounded
 * (DefaultJobOptions), which bounds it too.
 */
export async function tenantFigures(redis: RedisClient, queue: Queue, tenant: string): Promise<QueueFigures> {
  const k = queue.keys;
  const prefix = tenantIdPrefix(tenant);
  const [waiting, active, delayed, prioritized, completed, failed] = await COUNTS.run<number[]>(
    redis,
    [k.wait, k.paused, k.active, k.delayed, k.prioritized, k.completed, k.failed] as string[],
    [prefix === '' ? '' : bullJobId(prefix)],
  );
  return {
    name: queue.name,
    waiting: waiting ?? 0,
    active: active ?? 0,
    delayed: delayed ?? 0,
    prioritized: prioritized ?? 0,
    completed: completed ?? 0,
    failed: failed ?? 0,
  };
}
