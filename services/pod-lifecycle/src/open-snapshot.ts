import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  SnapshotIntegrityError,
  type SnapshotRecord,
  type SnapshotRecords,
  type SnapshotStore,
  snapshotFailure,
} from '@sandstream/bus';
import { checkedWhole, type SandboxBackend } from '@sandstream/sandbox';
import type { CaptureCache } from './capture-cache.js';
import type { CopyLease } from './local-copies.js';

export interface SnapshotSource {
  records: SnapshotRecords;
  /** Undefined without NATS_URL: every open is refused, saying so. */
  objects: SnapshotStore | undefined;
  /** The backend the bytes go into (a Docker layer restores on Docker only). */
  backend: Pick<SandboxBackend, 'kind'>;
  /** Captures this replica took (capture-cache.ts): a snapshot held there whole is read from it. */
  cache?: CaptureCache | undefined;
  /** Hears why a cached capture was not used (then the store is read). */
  onCacheRefused?: (reason: string) => void;
  /** Hears where each opened snapshot's bytes come from: a capture spooling here, the cache, the store. */
  onOpened?: (snapshotId: string, from: 'copy' | 'spool' | 'cache' | 'store') => void;
}

/**
 * A tenant's snapshot, checked before a single file changes: it exists and is the tenant's
 * (another tenant's is not found), it can restore on this backend, its checksum is recorded, and
 * its stored bytes are whole and match that checksum (SnapshotStore.open reads them all first).
 * Used by an in-place restore and by a sandbox that starts from a snapshot (create, fork), so
 * both refuse the same things with the same words. Failures carry the snapshot failure codes
 * (`not-found: …`, `corrupt: …`) and name the snapshot.
 *
 * A capture this replica holds in its cache (capture-cache.ts) is read from local disk, checked
 * against the record's size and SHA-256 (a damaged one is dropped and the store read instead).
 * Every stream handed out is marked checked whole (checked-whole.ts in the sandbox library): the
 * restore's decoder then skips its own SHA-256 of the same content.
 * With `uploadWaitMs` (a start), a snapshot still uploading is waited for, or, when this replica
 * spooled it, started from at once: a fork placed on the node that captured does not wait for
 * the upload.
 */
export async function openSnapshot(
  source: SnapshotSource,
  snapshotId: string,
  tenant: string,
  options: { uploadWaitMs?: number } = {},
): Promise<Readable> {
  if (!source.objects)
    throw snapshotFailure(
      'failed',
      `snapshot ${snapshotId}: snapshots are off: pod-lifecycle has no NATS_URL (their bytes live in JetStream)`,
    );
  const waitMs = options.uploadWaitMs ?? 0;
  const { cache } = source;
  // While its upload runs, a capture this replica spooled is as good as the stored one.
  const spooledHere = () =>
    waitMs > 0 &&
    cache !== undefined &&
    (cache.held(snapshotId) !== undefined || cache.isSpooling(snapshotId));
  let snapshot = await usableRecord(source.records, snapshotId, tenant, waitMs, spooledHere, cache);
  if (snapshot.backend === 'docker' && source.backend.kind !== 'docker')
    throw snapshotFailure(
      'conflict',
      `snapshot ${snapshotId} holds a Docker container layer: it restores on Docker only`,
    );
  if (snapshot.state === 'uploading') {
    const held = cache?.held(snapshotId);
    const cached =
      held && (await cache?.open(snapshotId, held, source.onCacheRefused).catch(() => undefined));
    if (cached) {
      source.onOpened?.(snapshotId, 'cache');
      return checkedWhole(cached);
    }
    // Still being captured: read as it is written (growing-spool.ts), each byte hashed against the
    // writer's hash; a mismatch fails the stream at its end, which the restore reads before it ends.
    const followed = cache?.follow(snapshotId);
    if (followed) {
      source.onOpened?.(snapshotId, 'spool');
      return checkedWhole(followed);
    }
    snapshot = await usableRecord(source.records, snapshotId, tenant, waitMs, () => false);
  }
  if (!snapshot.sha256) throw snapshotFailure('corrupt', `snapshot ${snapshotId} has no checksum recorded`);
  const expected = { sizeBytes: snapshot.sizeBytes, sha256: snapshot.sha256 };
  const cached = await source.cache?.open(snapshotId, expected, source.onCacheRefused).catch(() => undefined);
  if (cached) {
    source.onOpened?.(snapshotId, 'cache');
    return checkedWhole(cached);
  }
  try {
    const stored = await source.objects.open(snapshotId, expected);
    source.onOpened?.(snapshotId, 'store');
    return checkedWhole(stored);
  } catch (err) {
    throw snapshotFailure(codeOf(err as Error), (err as Error).message);
  }
}

/**
 * The plain copy this replica made of a fork's capture (local-copies.ts), once the tenant's record
 * says the snapshot is theirs and restores on this backend: waited for while it is being made.
 * Undefined when this replica holds none (or it failed): the caller opens the snapshot's bytes.
 */
export async function openLocalCopy(
  source: SnapshotSource,
  snapshotId: string,
  tenant: string,
  uploadWaitMs: number,
): Promise<CopyLease | undefined> {
  const { cache } = source;
  if (!cache || !source.objects) return undefined;
  // Any capture of it here ends the wait: a copy, or a spool (then openSnapshot takes over).
  const here = () => cache.copies.has(snapshotId) || cache.isSpooling(snapshotId) || !!cache.held(snapshotId);
  // Missing, another tenant's or still uploading after the wait: refused as openSnapshot would.
  const record = await usableRecord(source.records, snapshotId, tenant, uploadWaitMs, here, cache);
  // Another backend's: openSnapshot words the refusal.
  if (record.backend === 'docker' && source.backend.kind !== 'docker') return undefined;
  if (!cache.copies.has(snapshotId)) return undefined;
  return cache.copies.acquire(snapshotId, source.onCacheRefused);
}

/**
 * The tenant's record of the snapshot, complete, or still uploading where `usableUploading`
 * says its bytes are at hand. Another upload is waited for, up to `waitMs` (a fork's sandboxes
 * are created while their snapshot is captured): it becomes ready, or its capture failed and it
 * is gone (not found, as any missing snapshot). Without a wait only a complete one counts.
 */
async function usableRecord(
  records: SnapshotRecords,
  snapshotId: string,
  tenant: string,
  waitMs: number,
  usableUploading: () => boolean,
  cache?: Pick<CaptureCache, 'nextChange'>,
): Promise<SnapshotRecord> {
  const deadline = Date.now() + waitMs;
  let pauseMs = 5;
  let record = waitMs > 0 ? await records.read(snapshotId, tenant) : await records.get(snapshotId, tenant);
  while (record?.state === 'uploading' && !usableUploading() && Date.now() < deadline) {
    // A capture spooling or kept here wakes the wait at once (a fork placed on the node that captures).
    await Promise.race([sleep(pauseMs), cache?.nextChange()].filter(Boolean));
    pauseMs = Math.min(pauseMs * 2, 100);
    record = await records.read(snapshotId, tenant);
  }
  if (!record) throw snapshotFailure('not-found', `snapshot ${snapshotId} not found`);
  if (record.state !== 'ready' && !usableUploading())
    throw snapshotFailure(
      'conflict',
      `snapshot ${snapshotId} is still uploading after ${Math.round(waitMs / 1000)} s`,
    );
  return record;
}

/** A store's refusal of the bytes (missing, cut short, wrong checksum) is a corrupt snapshot; anything else (NATS down) a failure. */
function codeOf(err: Error): 'corrupt' | 'failed' {
  return err instanceof SnapshotIntegrityError ? 'corrupt' : 'failed';
}
