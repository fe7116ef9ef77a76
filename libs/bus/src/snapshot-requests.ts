import { JobIdSchema } from '@sandstream/wire';
import { type Job, Queue, QueueEvents } from 'bullmq';
import { Cluster } from 'ioredis';
import { z } from 'zod';
import type { KeySpace } from './key-space.js';
import { QueueNames } from './queues.js';
import type { RedisClient } from './redis-connection.js';
import { SnapshotIdSchema } from './snapshot-id.js';
import type { SnapshotRecord } from './snapshot-records.js';

/**
 * Capture and restore run where the backend is (pod-lifecycle): the SDK queues the request on
 * `sandbox-snapshot` and waits for its answer. `tenant` is the caller's: a sandbox or snapshot of
 * another tenant is answered as not found.
 */
export const SnapshotRequestSchema = z.discriminatedUnion('op', [
  z.strictObject({
    op: z.literal('capture'),
    sandboxId: JobIdSchema,
    tenant: z.string().min(1).optional(),
    snapshotId: SnapshotIdSchema,
    name: z.string().min(1).max(256).optional(),
  }),
  z.strictObject({
    op: z.literal('restore'),
    sandboxId: JobIdSchema,
    tenant: z.string().min(1).optional(),
    snapshotId: SnapshotIdSchema,
  }),
]);
export type SnapshotRequest = z.infer<typeof SnapshotRequestSchema>;

export const RestoreOutcomeSchema = z.object({
  snapshotId: z.string(),
  entries: z.number(),
  bytes: z.number(),
  removed: z.number(),
  frozenMs: z.number(),
});
export type RestoreOutcome = z.infer<typeof RestoreOutcomeSchema>;

/**
 * Why a request failed, as the processor's error message starts (`<code>: <message>`), so the
 * SDK can throw the matching typed error: `not-found`, `limit:<count|bytes>`, `corrupt`,
 * `conflict` (not ready, another backend), `failed`.
 */
export const SnapshotFailureCodes = [
  'not-found',
  'limit:count',
  'limit:bytes',
  'corrupt',
  'conflict',
  'failed',
] as const;
export type SnapshotFailureCode = (typeof SnapshotFailureCodes)[number];

export function snapshotFailure(code: SnapshotFailureCode, message: string): Error {
  return new Error(`${code}: ${message}`);
}

export function parseSnapshotFailure(message: string): { code: SnapshotFailureCode; message: string } {
  for (const code of SnapshotFailureCodes) {
    if (message.startsWith(`${code}: `)) return { code, message: message.slice(code.length + 2) };
  }
  return { code: 'failed', message };
}

/** The SDK's side: queue a request, wait for pod-lifecycle's answer. */
export class SnapshotRequests {
  private queue: Queue | undefined;
  private events: QueueEvents | undefined;
  private eventsRedis: RedisClient | undefined;
  private opened: Promise<{ queue: Queue; events: QueueEvents }> | undefined;

  constructor(
    private readonly connection: RedisClient,
    private readonly keys: KeySpace,
  ) {}

  capture(request: Extract<SnapshotRequest, { op: 'capture' }>, timeoutMs: number): Promise<SnapshotRecord> {
    return this.send(request, timeoutMs) as Promise<SnapshotRecord>;
  }

  async restore(
    request: Extract<SnapshotRequest, { op: 'restore' }>,
    timeoutMs: number,
  ): Promise<RestoreOutcome> {
    return RestoreOutcomeSchema.parse(await this.send(request, timeoutMs));
  }

  private async send(request: SnapshotRequest, timeoutMs: number): Promise<unknown> {
    this.opened ??= this.open();
    const { queue, events } = await this.opened;
    const job: Job = await queue.add(request.op, request);
    return job.waitUntilFinished(events, timeoutMs);
  }

  private async open(): Promise<{ queue: Queue; events: QueueEvents }> {
    this.queue = new Queue(QueueNames.sandboxSnapshot, {
      connection: this.connection,
      prefix: this.keys.bullPrefix,
      defaultJobOptions: { removeOnComplete: { age: 600 }, removeOnFail: { age: 3600 }, attempts: 1 },
    });
    this.queue.on('error', () => {});
    // QueueEvents blocks on a connection of its own, which BullMQ wants without a retry limit.
    this.eventsRedis =
      this.connection instanceof Cluster
        ? this.connection.duplicate(undefined, { redisOptions: { maxRetriesPerRequest: null } })
        : this.connection.duplicate({ maxRetriesPerRequest: null });
    this.events = new QueueEvents(QueueNames.sandboxSnapshot, {
      connection: this.eventsRedis,
      prefix: this.keys.bullPrefix,
    });
    this.events.on('error', () => {});
    await this.events.waitUntilReady();
    return { queue: this.queue, events: this.events };
  }

  async close(): Promise<void> {
    await Promise.all([this.queue?.close(), this.events?.close()]);
    this.eventsRedis?.disconnect();
  }
}
