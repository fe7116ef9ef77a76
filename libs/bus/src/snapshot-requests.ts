import { JobIdSchema } from '@sandstream/wire';
import { z } from 'zod';
import type { KeySpace } from './key-space.js';
import { codedFailures, QueuedRequests } from './queued-requests.js';
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
    /**
     * A fork's capture: pod-lifecycle also keeps a plain copy of the files, where its backend can
     * make one, for the forks placed on its node (local-copies.ts); other captures make none.
     */
    forFork: z.boolean().optional(),
    /**
     * The sandboxes a fork's capture is taken for (their ids, chosen by the caller before it
     * creates them): the snapshot is temporary. Pod-lifecycle answers once it is committed as
     * any capture, but drops it itself (record, stored bytes, local copies) once each of these
     * has its files or ended, so a caller that exits early leaks nothing; it is never listed,
     * and its record expires one upload grace after its commit should that replica die first.
     */
    forks: z.array(JobIdSchema).min(1).max(100).optional(),
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

const snapshotFailures = codedFailures(SnapshotFailureCodes);
export const snapshotFailure = snapshotFailures.failure;
export const parseSnapshotFailure = snapshotFailures.parse;

/**
 * How pod-lifecycle's worker takes snapshot requests. A request whose replica dies mid-way is not
 * run again (BullMQ would, once, after the lock lapses): the reaper is already clearing the dead
 * upload under the same snapshot id the retry would write, and a capture finished after its
 * caller gave up would be a snapshot nobody asked for, counted in the tenant's quota. The caller
 * is told instead (see QueuedRequests) and may ask again.
 */
export const SNAPSHOT_WORKER_OPTIONS = {
  // A capture of a large sandbox holds the job for a while: renewed, not stalled.
  lockDuration: 60_000,
  maxStalledCount: 0,
} as const;

/** The SDK's side: queue a request, wait for pod-lifecycle's answer. */
export class SnapshotRequests {
  private readonly requests: QueuedRequests;

  constructor(connection: RedisClient, keys: KeySpace) {
    this.requests = new QueuedRequests(connection, keys, QueueNames.sandboxSnapshot);
  }

  capture(request: Extract<SnapshotRequest, { op: 'capture' }>, timeoutMs: number): Promise<SnapshotRecord> {
    return this.send(request, timeoutMs) as Promise<SnapshotRecord>;
  }

  async restore(
    request: Extract<SnapshotRequest, { op: 'restore' }>,
    timeoutMs: number,
  ): Promise<RestoreOutcome> {
    return RestoreOutcomeSchema.parse(await this.send(request, timeoutMs));
  }

  private send(request: SnapshotRequest, timeoutMs: number): Promise<unknown> {
    return this.requests.send(request.op, request, timeoutMs);
  }

  close(): Promise<void> {
    return this.requests.close();
  }
}
