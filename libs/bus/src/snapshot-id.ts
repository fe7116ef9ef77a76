import { randomBytes } from 'node:crypto';
import { z } from 'zod';

/** `snap-` and 20 random hex digits: ids are unguessable, and say nothing of their tenant. */
export const SnapshotIdSchema = z
  .string()
  .regex(/^snap-[0-9a-f]{20}$/, 'a snapshot id is snap- and 20 hex digits');

export function newSnapshotId(): string {
  return `snap-${randomBytes(10).toString('hex')}`;
}
