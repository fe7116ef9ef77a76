import { randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { listTree, type TreeListing } from '@sandstream/sandbox';
import { signal } from './growing-spool.js';

export interface LocalCopiesOptions {
  /** This process's directory for copies (removed on close). */
  dir: string;
  /** Bytes of copies kept at most; the oldest go first. */
  maxBytes: number;
  /** A copy older than this is no longer handed out, and goes. */
  maxAgeMs: number;
  now?: () => number;
  /** Hears that a copy started being made or ended (starts waiting for a snapshot look again). */
  onChange?: () => void;
}

/** A copy in use by a restore: not removed (evicted, dropped) until released. */
export interface CopyLease {
  dir: string;
  listing: TreeListing;
  /**
   * Undefined when the copy is as it was made, else why not (the copy is dropped then, and the
   * caller restores from the snapshot's bytes instead).
   */
  check(): Promise<string | undefined>;
  /** Done with it (idempotent). */
  release(): void;
}

interface Copy {
  dir: string;
  listing: TreeListing;
  keptAt: number;
  users: number;
  /** Leases released so far: restores done with it. */
  releases: number;
  dropped: boolean;
}

/**
 * Plain copies of the files a fork's capture took (backend.copyFiles), kept on this node so a
 * fork placed here restores by copying a tree (restoreCopy) instead of inflating and writing a
 * stream: issue 30 §7, fork → first exec. The snapshot is still stored whole in the object store
 * (encoded from the copy after the source thawed); a copy only spares this node's forks the
 * stream. Bounded by bytes and age like the capture cache; a copy is checked against the listing
 * taken when it was made (every path's inode, change time and size: listTree) before a restore
 * uses it, and one that differs is dropped, the restore then reading the snapshot's bytes.
 */
export class LocalCopies {
  private readonly copies = new Map<string, Copy>();
  private readonly staging = new Map<string, Promise<Copy | undefined>>();
  private bytes = 0;
  private readonly now: () => number;
  private changes = signal();

  constructor(private readonly options: LocalCopiesOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Bytes and copies held now. */
  get size(): { bytes: number; entries: number } {
    return { bytes: this.bytes, entries: this.copies.size };
  }

  /** Resolves when a copy starts being made or is kept. */
  nextChange(): Promise<void> {
    return this.changes.promise;
  }

  /** Whether a copy of `snapshotId` is being made or held here. */
  has(snapshotId: string): boolean {
    return this.staging.has(snapshotId) || this.copies.has(snapshotId);
  }

  /**
   * Resolves once `restores` restores have been done with the copy of `snapshotId` and none holds
   * it (or there is no such copy), or at `until` (epoch ms) whatever holds it. The upload encoded
   * from a fork's copy waits here: on a 2-core node it competed with the forks' own start and
   * restore from the copy (fork → first exec p50 193 → 114 ms once it waits: docs/benchmarks.md, "Fork path, part 6").
   */
  async unused(snapshotId: string, until: number, restores = 0): Promise<void> {
    for (;;) {
      const copy = this.copies.get(snapshotId);
      const left = until - Date.now();
      if (!copy || copy.dropped || left <= 0) return;
      if (copy.users === 0 && copy.releases >= restores) return;
      const timer = signal();
      const timeout = setTimeout(() => timer.resolve(), left);
      try {
        await Promise.race([this.changes.promise, timer.promise]);
      } finally {
        clearTimeout(timeout);
      }
    }
  }

  /**
   * Makes a copy with `copy` (given a fresh directory) and keeps it for `snapshotId`, under the
   * bounds. A failed copy leaves nothing and throws; starts waiting for it then read the snapshot.
   */
  async make<T>(
    snapshotId: string,
    copy: (into: string) => Promise<T>,
  ): Promise<{ result: T; dir: string; listing: TreeListing }> {
    const dir = join(this.options.dir, `${snapshotId}.${randomUUID().slice(0, 8)}`);
    let settle!: (made: Copy | undefined) => void;
    this.staging.set(
      snapshotId,
      new Promise((resolve) => {
        settle = resolve;
      }),
    );
    this.changed();
    try {
      await mkdir(this.options.dir, { recursive: true });
      const result = await copy(dir);
      const listing = await listTree(dir);
      const made: Copy = { dir, listing, keptAt: this.now(), users: 0, releases: 0, dropped: false };
      await this.keep(snapshotId, made);
      settle(this.copies.get(snapshotId) === made ? made : undefined);
      return { result, dir, listing };
    } catch (err) {
      settle(undefined);
      await rm(dir, { recursive: true, force: true });
      throw err;
    } finally {
      this.staging.delete(snapshotId);
      this.changed();
    }
  }

  /**
   * The copy of `snapshotId` for a restore, waiting for one being made; undefined when there is
   * none (or it failed, or it expired). The lease keeps it on disk until released.
   */
  async acquire(snapshotId: string, onRefused?: (reason: string) => void): Promise<CopyLease | undefined> {
    const copy = (await this.staging.get(snapshotId)) ?? this.copies.get(snapshotId);
    if (!copy || copy.dropped) return undefined;
    if (this.expired(copy)) {
      await this.drop(snapshotId, copy);
      return undefined;
    }
    copy.users++;
    let released = false;
    return {
      dir: copy.dir,
      listing: copy.listing,
      check: async () => {
        const now = await listTree(copy.dir).catch((err: Error) => err);
        const reason =
          now instanceof Error
            ? `the local copy of ${snapshotId} cannot be listed: ${now.message}`
            : now.fingerprint !== copy.listing.fingerprint
              ? `the local copy of ${snapshotId} changed after it was made (${now.entries} entries and ${now.bytes} bytes, made with ${copy.listing.entries} and ${copy.listing.bytes})`
              : undefined;
        if (reason) {
          onRefused?.(reason);
          await this.drop(snapshotId, copy);
        }
        return reason;
      },
      release: () => {
        if (released) return;
        released = true;
        copy.users--;
        copy.releases++;
        if (copy.dropped && copy.users === 0) void rm(copy.dir, { recursive: true, force: true });
        // An upload waiting for the copy to be unused (unused) goes on.
        if (copy.users === 0) this.changed();
      },
    };
  }

  /** Drops the copy of `snapshotId` (its capture failed): a restore using it keeps it until released. */
  async forget(snapshotId: string): Promise<void> {
    const copy = this.copies.get(snapshotId);
    if (copy) await this.drop(snapshotId, copy);
  }

  /** Drops what is past the age bound. */
  async sweep(): Promise<void> {
    for (const [snapshotId, copy] of [...this.copies])
      if (this.expired(copy)) await this.drop(snapshotId, copy);
  }

  /** Removes every copy (shutdown): the caller removes the directory. */
  clear(): void {
    this.copies.clear();
    this.bytes = 0;
  }

  private async keep(snapshotId: string, copy: Copy): Promise<void> {
    if (copy.listing.bytes > this.options.maxBytes) {
      await rm(copy.dir, { recursive: true, force: true });
      return;
    }
    const previous = this.copies.get(snapshotId);
    if (previous) await this.drop(snapshotId, previous);
    this.copies.set(snapshotId, copy);
    this.bytes += copy.listing.bytes;
    await this.sweep();
    // Map order is insertion order: the oldest go first until the bound holds.
    for (const [id, held] of [...this.copies]) {
      if (this.bytes <= this.options.maxBytes) break;
      await this.drop(id, held);
    }
  }

  private changed(): void {
    const changes = this.changes;
    this.changes = signal();
    changes.resolve();
    this.options.onChange?.();
  }

  private expired(copy: Copy): boolean {
    return this.now() - copy.keptAt > this.options.maxAgeMs;
  }

  /** Out of the map now; off the disk once no restore uses it. */
  private async drop(snapshotId: string, copy: Copy): Promise<void> {
    if (this.copies.get(snapshotId) === copy) {
      this.copies.delete(snapshotId);
      this.bytes -= copy.listing.bytes;
    }
    copy.dropped = true;
    if (copy.users === 0) await rm(copy.dir, { recursive: true, force: true });
  }
}
