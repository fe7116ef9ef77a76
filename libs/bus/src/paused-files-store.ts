import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { z } from 'zod';
import type { JobStore } from './job-store.js';
import type { PausedFilesQuota } from './paused-files-quota.js';
import type { SnapshotStore } from './snapshot-store.js';

/**
 * Where kept files go: the snapshot store (NATS JetStream's object store, off the node), through
 * the few calls a pause needs. A pause's files are a snapshot like any other (same capture, same
 * format, same store), owned by the paused sandbox rather than listed as the tenant's.
 */
export interface PausedFilesStore {
  /**
   * Stores a snapshot stream; answers its reference once it is whole (checksummed, complete).
   * `objectId` (pausedObjectName of the owner) names it where the caller spools it too.
   */
  put(stream: Readable, owner: { sandboxId: string; tenant: string }, objectId?: string): Promise<string>;
  /** Where kept files are and what they must be: the object's name, its size and SHA-256. */
  located(kept: string): { objectId: string; sizeBytes: number; sha256: string };
  /**
   * A stored snapshot's stream, found whole first (read once, checked, spooled to a local file;
   * refused, naming what is wrong, when it is corrupt or cut short). A Readable, so a start that
   * ends without it can destroy it (and its spool).
   */
  get(snapshotId: string): Promise<Readable>;
  /**
   * The same bytes as they are read, hashed on the way: the stream fails at its end, naming what
   * is wrong, when they are corrupt or cut short. For a restore that writes while it reads into
   * a sandbox a failure throws away (a resume's start is retried on a clean one, the kept files
   * untouched). Nothing is read before the stream is.
   */
  stream(snapshotId: string): Readable;
  /** Idempotent. */
  delete(snapshotId: string): Promise<void>;
}

/** What a paused sandbox's record keeps of its files: the object, its size and SHA-256. */
const KeptFilesSchema = z.object({
  objectId: z.string().min(1),
  sizeBytes: z.number().int().min(0),
  sha256: z.string().length(64),
  /** Whose snapshot bytes it counts in (PausedFilesQuota); absent in files kept before it did. */
  tenant: z.string().optional(),
});

/** Object names of paused sandboxes' files in the snapshot bucket (no snapshot record of their own). */
export const PAUSED_OBJECT_PREFIX = 'pause-';
const UUID_LENGTH = 36;

/** `pause-<sandboxId>-<uuid>`: the object names its owner, so a sweep can ask the owner's record. */
export function pausedObjectName(sandboxId: string): string {
  return `${PAUSED_OBJECT_PREFIX}${sandboxId}-${randomUUID()}`;
}

/** The sandbox a paused object belongs to, or null for any other object. */
export function pausedObjectOwner(name: string): string | null {
  if (!name.startsWith(PAUSED_OBJECT_PREFIX) || name.length <= PAUSED_OBJECT_PREFIX.length + UUID_LENGTH + 1)
    return null;
  return name.slice(PAUSED_OBJECT_PREFIX.length, -(UUID_LENGTH + 1));
}

/**
 * Whether a paused object is still kept by its sandbox (its record's `pausedFiles` names it): the
 * snapshots' orphan sweep leaves it then; otherwise it is an orphan (a keep cut short, say) once
 * older than the upload grace, as an unfinished snapshot is.
 */
export async function pausedObjectKept(store: JobStore, name: string): Promise<boolean> {
  const owner = pausedObjectOwner(name);
  if (owner === null) return false;
  const kept = (await store.get(owner))?.pausedFiles;
  if (kept === undefined) return false;
  try {
    return KeptFilesSchema.parse(JSON.parse(kept)).objectId === name;
  } catch {
    return false;
  }
}

/**
 * The snapshot store (NATS JetStream's object store, the snapshots' SnapshotStore) as pauses use
 * it: the same bucket, the same streaming upload, the same size and SHA-256 checked before a
 * restore changes a file. A pause's files are owned by the paused sandbox (its record keeps the
 * reference), not listed among the tenant's snapshots, so a `snapshot rm` cannot take them.
 */
export function pausedFilesStoreOf(objects: SnapshotStore, quota: PausedFilesQuota): PausedFilesStore {
  const parse = (kept: string) => KeptFilesSchema.parse(JSON.parse(kept));
  return {
    put: async (stream: Readable, owner, objectId = pausedObjectName(owner.sandboxId)) => {
      const stored = await objects.put(objectId, stream);
      // Counted once stored, before the record names it: an object the pause then loses is
      // over-counted until the reaper's sweep, never under-counted.
      await quota.hold(owner.tenant, objectId, stored.sizeBytes);
      return JSON.stringify({ objectId, ...stored, tenant: owner.tenant });
    },
    located: (kept) => {
      const { objectId, sizeBytes, sha256 } = parse(kept);
      return { objectId, sizeBytes, sha256 };
    },
    get: async (kept) => {
      const { objectId, tenant: _tenant, ...expected } = parse(kept);
      return objects.open(objectId, expected);
    },
    stream: (kept) => {
      const { objectId, tenant: _tenant, ...expected } = parse(kept);
      return objects.stream(objectId, expected);
    },
    delete: async (kept) => {
      const { objectId, tenant } = parse(kept);
      await objects.delete(objectId);
      if (tenant !== undefined) await quota.release(tenant, objectId);
    },
  };
}
