import { SnapshotIdSchema, type SnapshotRecord } from '@sandstream/bus';
import { z } from 'zod';
import { SnapshotNotFoundError } from './sandbox-errors.js';
import type { SandboxTransport } from './transport.js';

/** What `sandbox.snapshot()` answers and `client.snapshots` lists (docs/snapshots.md). */
export type SnapshotInfo = Omit<SnapshotRecord, 'state'>;

export const SnapshotOptionsSchema = z.strictObject({
  /** A name to tell it by in `snapshot ls` (not unique). */
  name: z.string().min(1, 'name must not be empty').max(256, 'name is at most 256 characters').optional(),
  /** How long to wait for the capture (large sandboxes take a while); default 600. */
  timeoutSeconds: z.number().positive().max(3600, 'timeoutSeconds is at most 3600').optional(),
});
export type SnapshotOptions = z.input<typeof SnapshotOptionsSchema>;

export const ForkOptionsSchema = z.strictObject({
  count: z
    .number({ error: 'count must be a number' })
    .int('count must be a whole number')
    .min(1, 'count is at least 1')
    .max(100, 'count is at most 100'),
  timeoutSeconds: z.number().positive().max(3600, 'timeoutSeconds is at most 3600').optional(),
});
export type ForkOptions = z.input<typeof ForkOptionsSchema>;

/** What `sandbox.restore()` did. */
export interface RestoreResult {
  snapshotId: string;
  /** Commands that were still running and were stopped (killed) before the files changed. */
  stoppedCommands: string[];
  entries: number;
  bytes: number;
  /** Paths removed because the snapshot did not have them. */
  removed: number;
  /** How long the sandbox's remaining processes were frozen for the restore. */
  frozenMs: number;
}

export function snapshotInfoOf(record: SnapshotRecord): SnapshotInfo {
  const { state: _state, ...info } = record;
  return info;
}

/** `client.snapshots`: a tenant's snapshots (take one with `sandbox.snapshot()`). */
export class Snapshots {
  constructor(private readonly transport: SandboxTransport) {}

  /** The same, for one tenant's snapshots only (another tenant's answered as not found). */
  forTenant(tenant: string): Snapshots {
    return new Snapshots(this.transport.forTenant(tenant));
  }

  list(): Promise<SnapshotInfo[]> {
    return this.transport.listSnapshots();
  }

  /** The snapshot, or null (unknown, or another tenant's). */
  get(snapshotId: string): Promise<SnapshotInfo | null> {
    if (!SnapshotIdSchema.safeParse(snapshotId).success) return Promise.resolve(null);
    return this.transport.getSnapshot(snapshotId);
  }

  /** Deletes it (its stored bytes go with the reaper's next pass); SnapshotNotFoundError when unknown. */
  async delete(snapshotId: string): Promise<void> {
    if (!SnapshotIdSchema.safeParse(snapshotId).success || !(await this.transport.deleteSnapshot(snapshotId)))
      throw new SnapshotNotFoundError(snapshotId);
  }
}
