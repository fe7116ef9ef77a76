import { createHash, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { type FileHandle, mkdir, open, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { GrowingSpool, signal } from './growing-spool.js';
import { LocalCopies } from './local-copies.js';

export interface CaptureCacheOptions {
  /** Root of the caches on this node: each process keeps its own directory below it. */
  root: string;
  /** Bytes kept at most; the oldest captures go first. 0 keeps nothing (every spool is discarded). */
  maxBytes: number;
  /** A capture older than this is no longer handed out, and its file goes. */
  maxAgeMs: number;
  now?: () => number;
}

/** A capture's bytes written to a local file, hashed on the way (CaptureCache.spool). */
export interface SpooledCapture {
  sizeBytes: number;
  sha256: string;
  /** The bytes again, from the local file (the upload reads them here, the sandbox thawed). */
  read(): Readable;
  /**
   * Kept for restores on this node, under the bounds; the spool is the cache's now. Called as
   * soon as the capture is spooled, before its upload: a fork placed here starts from it while
   * the upload goes on.
   */
  keep(): Promise<void>;
  /** Removed, from the cache too: the capture or its upload failed. */
  discard(): Promise<void>;
}

interface Entry {
  path: string;
  sizeBytes: number;
  sha256: string;
  keptAt: number;
}

/**
 * Captures this replica took, kept on its local disk for a bounded time and size, so a sandbox
 * created from one of them here (a fork placed on the node that captured) restores from the
 * local file instead of reading the object store again. Entries are whole captures only (kept
 * once read to their end, while their upload runs; dropped if it fails), found by snapshot id,
 * and checked before use: a file whose size or SHA-256 differs from what the caller expects (the
 * snapshot's record, or the spool's own hash while the upload runs) is dropped and the caller
 * reads the store. A reader opens the file before anything can evict it: a removed file stays readable
 * through its descriptor, so eviction never cuts a restore short. The process's directory goes
 * on close(); a directory a dead process left (kill -9) is removed by any live one's sweep once
 * it is older than the age bound (it can hold nothing usable any more).
 */
export class CaptureCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private readonly dir: string;
  private readonly made: Promise<void>;
  private readonly now: () => number;
  private readonly sweeper: NodeJS.Timeout;
  private kept = signal();
  private readonly spooling = new Map<string, GrowingSpool>();
  /** Plain copies of forks' captures (local-copies.ts), in a directory beside the spools', same bounds. */
  readonly copies: LocalCopies;
  private readonly copiesDir: string;

  constructor(private readonly options: CaptureCacheOptions) {
    this.now = options.now ?? Date.now;
    const suffix = `${process.pid}-${randomUUID().slice(0, 8)}`;
    this.dir = join(options.root, `sandstream-captures-${suffix}`);
    this.copiesDir = join(options.root, `sandstream-copies-${suffix}`);
    this.copies = new LocalCopies({
      dir: this.copiesDir,
      maxBytes: options.maxBytes,
      maxAgeMs: options.maxAgeMs,
      ...(options.now ? { now: options.now } : {}),
      onChange: () => this.changed(),
    });
    this.made = this.removeAbandoned().then(() => mkdir(this.dir, { recursive: true }).then(() => {}));
    this.made.catch(() => {});
    this.sweeper = setInterval(() => void this.sweep(), Math.max(1000, Math.min(options.maxAgeMs, 60_000)));
    this.sweeper.unref();
  }

  /** Bytes and captures held now. */
  get size(): { bytes: number; entries: number } {
    return { bytes: this.bytes, entries: this.entries.size };
  }

  /** The process's own directory (tests damage entries there). */
  get directory(): string {
    return this.dir;
  }

  /** Reads `source` to its end into a local file, hashing it: the capture is done when this resolves. */
  async spool(snapshotId: string, source: AsyncIterable<Buffer>): Promise<SpooledCapture> {
    await this.made.catch(() => {});
    // Again each time: another replica's start removes a directory idle past the age bound.
    await mkdir(this.dir, { recursive: true });
    const path = join(this.dir, `${snapshotId}.${randomUUID().slice(0, 8)}`);
    const hash = createHash('sha256');
    let sizeBytes = 0;
    const out = createWriteStream(path);
    // Seen here (a full disk), never an uncaught 'error' event: the next write or the end throws it.
    let writeError: Error | undefined;
    out.on('error', (err) => {
      writeError ??= err;
    });
    const growing = new GrowingSpool(path);
    try {
      await once(out, 'open');
      // Readable from now on by a restore on this replica (follow): it wakes waiting starts.
      this.spooling.set(snapshotId, growing);
      this.changed();
      for await (const chunk of source) {
        hash.update(chunk);
        sizeBytes += chunk.length;
        if (writeError) throw writeError;
        if (!out.write(chunk)) await once(out, 'drain');
        growing.grew();
      }
      out.end();
      await finished(out);
    } catch (err) {
      growing.fail(err as Error);
      out.destroy();
      await rm(path, { force: true });
      throw err;
    } finally {
      if (this.spooling.get(snapshotId) === growing) this.spooling.delete(snapshotId);
    }
    const sha256 = hash.digest('hex');
    growing.finish(sizeBytes, sha256);
    // Opened now: the upload reads through this descriptor even if the entry is evicted meanwhile.
    const file = await open(path, 'r');
    let reading = false;
    return {
      sizeBytes,
      sha256,
      read: () => {
        reading = true;
        return file.createReadStream({ start: 0, highWaterMark: 1 << 20, autoClose: true });
      },
      keep: () => this.add(snapshotId, { path, sizeBytes, sha256, keptAt: this.now() }),
      discard: async () => {
        if (!reading) await file.close().catch(() => {});
        const entry = this.entries.get(snapshotId);
        if (entry?.path === path) await this.drop(snapshotId, entry);
        else await rm(path, { force: true });
      },
    };
  }

  /** Resolves when a capture starts spooling or is kept (a start waiting for its snapshot looks again then). */
  nextChange(): Promise<void> {
    return this.kept.promise;
  }

  /**
   * The bytes of a capture this replica is spooling right now, from the start and following the
   * file as it grows (growing-spool.ts); undefined when none is under way for `snapshotId`.
   */
  follow(snapshotId: string): Readable | undefined {
    const growing = this.spooling.get(snapshotId);
    return growing ? Readable.from(growing.follow(), { objectMode: false }) : undefined;
  }

  /** Whether a capture of `snapshotId` is being spooled here now. */
  isSpooling(snapshotId: string): boolean {
    return this.spooling.has(snapshotId);
  }

  /** Size and SHA-256 of the capture held for `snapshotId` (as spooled), if one is. */
  held(snapshotId: string): { sizeBytes: number; sha256: string } | undefined {
    const entry = this.entries.get(snapshotId);
    return entry && !this.expired(entry) ? { sizeBytes: entry.sizeBytes, sha256: entry.sha256 } : undefined;
  }

  /**
   * The capture's bytes from the local file when this replica holds it whole and unchanged
   * (size and SHA-256 as `expected`, which the caller took from the snapshot's record);
   * undefined otherwise, the caller then reads the store. `onRefused` hears why a held file
   * was not used (damaged or cut short).
   */
  async open(
    snapshotId: string,
    expected: { sizeBytes: number; sha256: string },
    onRefused?: (reason: string) => void,
  ): Promise<Readable | undefined> {
    const entry = this.entries.get(snapshotId);
    if (!entry) return undefined;
    if (this.expired(entry)) {
      await this.drop(snapshotId, entry);
      return undefined;
    }
    let file: FileHandle;
    try {
      file = await open(entry.path, 'r');
    } catch {
      await this.drop(snapshotId, entry);
      onRefused?.(`the cached capture of ${snapshotId} is gone from the local disk`);
      return undefined;
    }
    try {
      const held = await hashOf(file);
      if (held.sizeBytes !== expected.sizeBytes || held.sha256 !== expected.sha256) {
        await file.close();
        await this.drop(snapshotId, entry);
        onRefused?.(
          `the cached capture of ${snapshotId} holds ${held.sizeBytes} bytes hashing to ${held.sha256}, the record ${expected.sizeBytes} bytes and ${expected.sha256}: read from the store instead`,
        );
        return undefined;
      }
    } catch (err) {
      await file.close().catch(() => {});
      throw err;
    }
    return file.createReadStream({ start: 0, highWaterMark: 1 << 20, autoClose: true });
  }

  /**
   * Drops what this replica holds of `snapshotId`, spooled capture and plain copy (a fork's
   * temporary snapshot, dropped): a restore reading either keeps it until it is done.
   */
  async forget(snapshotId: string): Promise<void> {
    const entry = this.entries.get(snapshotId);
    if (entry) await this.drop(snapshotId, entry);
    await this.copies.forget(snapshotId);
  }

  /** Removes the process's directory and everything in it (shutdown). */
  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.entries.clear();
    this.bytes = 0;
    this.copies.clear();
    await this.made.catch(() => {});
    await rm(this.dir, { recursive: true, force: true });
    await rm(this.copiesDir, { recursive: true, force: true });
  }

  /** Drops what is past the age bound, and what dead processes left (removeAbandoned). */
  async sweep(): Promise<void> {
    await this.dropExpired();
    await this.copies.sweep();
    await this.removeAbandoned();
  }

  private async dropExpired(): Promise<void> {
    for (const [snapshotId, entry] of [...this.entries])
      if (this.expired(entry)) await this.drop(snapshotId, entry);
  }

  private async add(snapshotId: string, entry: Entry): Promise<void> {
    if (entry.sizeBytes > this.options.maxBytes) {
      await rm(entry.path, { force: true });
      return;
    }
    const previous = this.entries.get(snapshotId);
    if (previous) await this.drop(snapshotId, previous);
    this.entries.set(snapshotId, entry);
    this.bytes += entry.sizeBytes;
    this.changed();
    await this.dropExpired();
    // Map order is insertion order: the oldest go first until the bound holds.
    for (const [id, held] of [...this.entries]) {
      if (this.bytes <= this.options.maxBytes) break;
      await this.drop(id, held);
    }
  }

  private changed(): void {
    const kept = this.kept;
    this.kept = signal();
    kept.resolve();
  }

  private expired(entry: Entry): boolean {
    return this.now() - entry.keptAt > this.options.maxAgeMs;
  }

  private async drop(snapshotId: string, entry: Entry): Promise<void> {
    if (this.entries.get(snapshotId) !== entry) return;
    this.entries.delete(snapshotId);
    this.bytes -= entry.sizeBytes;
    await rm(entry.path, { force: true });
  }

  /**
   * Directories of dead processes' caches, untouched for longer than the age bound (the directory
   * and every file in it: a live replica's long capture keeps writing its spool), so nothing in
   * them is usable.
   */
  private async removeAbandoned(): Promise<void> {
    const names = await readdir(this.options.root).catch(() => [] as string[]);
    const now = Date.now();
    for (const name of names) {
      if (!name.startsWith('sandstream-captures-') && !name.startsWith('sandstream-copies-')) continue;
      const path = join(this.options.root, name);
      if (path === this.dir || path === this.copiesDir) continue;
      const touched = await lastTouched(path);
      if (touched !== undefined && now - touched > this.options.maxAgeMs)
        await rm(path, { recursive: true, force: true }).catch(() => {});
    }
  }
}

/** The latest modification time of a directory and the files in it. */
async function lastTouched(dir: string): Promise<number | undefined> {
  const info = await stat(dir).catch(() => undefined);
  if (!info) return undefined;
  let latest = info.mtimeMs;
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const file = await stat(join(dir, name)).catch(() => undefined);
    if (file) latest = Math.max(latest, file.mtimeMs);
  }
  return latest;
}

async function hashOf(file: FileHandle): Promise<{ sizeBytes: number; sha256: string }> {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(1 << 20);
  let sizeBytes = 0;
  for (;;) {
    const { bytesRead } = await file.read(buffer, 0, buffer.length, sizeBytes);
    if (bytesRead === 0) break;
    hash.update(buffer.subarray(0, bytesRead));
    sizeBytes += bytesRead;
  }
  return { sizeBytes, sha256: hash.digest('hex') };
}
