import {
  chmodSync,
  closeSync,
  fchmodSync,
  fchownSync,
  futimesSync,
  lchownSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  type Stats,
  symlinkSync,
  utimesSync,
  writeSync,
} from 'node:fs';
import { dirname } from 'node:path';
import type { SnapshotEntry } from './snapshot-entry.js';

/**
 * One step of a restore's writes, as the main thread hands them to the writer thread
 * (entry-writer.ts). `at`/`length` point into the batch's data buffer.
 */
export type EntryOp =
  | { op: 'file'; full: string; entry: SnapshotEntry; at: number; length: number }
  | { op: 'begin'; full: string; entry: SnapshotEntry }
  | { op: 'append'; at: number; length: number }
  | { op: 'end'; full: string; entry: SnapshotEntry }
  | { op: 'dir' | 'symlink'; full: string; entry: SnapshotEntry }
  | { op: 'whiteout'; full: string }
  | { op: 'finish' };

/** This process's umask from /proc (asking `process.umask()` sets it for a moment); undefined when unknown. */
const UMASK: number | undefined = (() => {
  try {
    const line = /^Umask:\s*([0-7]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    return line ? Number.parseInt(line[1] as string, 8) : undefined;
  } catch {
    return undefined;
  }
})();

/**
 * A snapshot's millisecond time in seconds, at the middle of its millisecond: `ms / 1000` as a
 * double often lands a hair below the millisecond (056 set, 055.999… read back), and a capture
 * of the restored tree, which floors, then recorded a time one millisecond early.
 */
function secondsOf(mtimeMs: number): number {
  return (mtimeMs + 0.5) / 1000;
}

function ignoreUnprivileged(err: unknown): void {
  // Not root (an in-process sandbox of an ordinary user): files keep this user as owner.
  if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
}

/**
 * The writes of one restore, applied in order with synchronous system calls, as `tar -x` makes
 * them: run on a thread of its own (entry-writer-thread.ts), each call costs only itself, where
 * the thread pool cost the main thread a submission, a callback and a promise per call (most of a
 * restore's CPU in the profile, docs/benchmarks.md). In order, a directory exists before what is
 * in it and a whiteout follows everything before it without any bookkeeping.
 */
export class EntryOps {
  /** Directories known to exist: no `mkdir -p` for what goes into them. */
  private readonly present = new Set<string>();
  /** Directories made here: nothing under them existed, so no lstat for their children. */
  private readonly fresh = new Set<string>();
  private readonly dirs: Array<{ full: string; entry: SnapshotEntry }> = [];
  /** The large file being written piece by piece. */
  private open: { fd: number; full: string } | undefined;

  apply(op: EntryOp, data: Buffer): void {
    switch (op.op) {
      case 'whiteout':
        if (this.existing(op.full)) rmSync(op.full, { recursive: true, force: true });
        this.present.delete(op.full);
        return;
      case 'dir':
        this.dir(op.full, op.entry);
        return;
      case 'symlink':
        this.clear(op.full, op.entry);
        this.parentReady(op.full);
        symlinkSync(op.entry.target ?? '', op.full);
        this.own(() => lchownSync(op.full, op.entry.uid, op.entry.gid));
        try {
          lutimesSync(op.full, secondsOf(op.entry.mtimeMs), secondsOf(op.entry.mtimeMs));
        } catch {
          // Times of a symlink are best effort (not every file system keeps them).
        }
        return;
      case 'file':
        this.file(op.full, op.entry, data.subarray(op.at, op.at + op.length));
        return;
      case 'begin':
        this.clear(op.full, op.entry);
        this.parentReady(op.full);
        // Truncated in place (not unlinked): a process holding the file open sees the restored bytes.
        this.open = { fd: openSync(op.full, 'w', op.entry.mode), full: op.full };
        return;
      case 'append':
        if (!this.open) throw new Error('restore: a piece of a large file came without its start');
        writeAll(this.open.fd, data.subarray(op.at, op.at + op.length));
        return;
      case 'end':
        this.closeOpen();
        this.own(() => lchownSync(op.full, op.entry.uid, op.entry.gid));
        chmodSync(op.full, op.entry.mode);
        utimesSync(op.full, secondsOf(op.entry.mtimeMs), secondsOf(op.entry.mtimeMs));
        return;
      case 'finish':
        // Deepest first: a directory's time is set after everything in it was written.
        for (const { full, entry } of this.dirs.reverse()) {
          chmodSync(full, entry.mode);
          utimesSync(full, secondsOf(entry.mtimeMs), secondsOf(entry.mtimeMs));
        }
        this.dirs.length = 0;
        return;
    }
  }

  /** Releases what a restore that stopped midway still holds. */
  close(): void {
    this.closeOpen();
  }

  private closeOpen(): void {
    if (this.open) closeSync(this.open.fd);
    this.open = undefined;
  }

  private dir(full: string, entry: SnapshotEntry): void {
    const { free } = this.clear(full, entry);
    this.parentReady(full);
    if (free) {
      mkdirSync(full);
      this.fresh.add(full);
    }
    this.present.add(full);
    this.dirs.push({ full, entry });
    this.own(() => lchownSync(full, entry.uid, entry.gid));
  }

  /**
   * A file written whole, then its owner, mode and times through the descriptor. The mode is set
   * only when `open` cannot have set it exactly: the file existed, or the umask or special bits differ.
   */
  private file(full: string, entry: SnapshotEntry, data: Buffer): void {
    const { free } = this.clear(full, entry);
    this.parentReady(full);
    const fd = openSync(full, 'w', entry.mode);
    try {
      writeAll(fd, data);
      this.own(() => fchownSync(fd, entry.uid, entry.gid));
      const modeSetByOpen = free && entry.mode <= 0o777 && UMASK !== undefined && (entry.mode & UMASK) === 0;
      if (!modeSetByOpen) fchmodSync(fd, entry.mode);
      futimesSync(fd, secondsOf(entry.mtimeMs), secondsOf(entry.mtimeMs));
    } finally {
      closeSync(fd);
    }
  }

  private own(chown: () => void): void {
    try {
      chown();
    } catch (err) {
      ignoreUnprivileged(err);
    }
  }

  /** What is at `full` now, unless its directory was made here (then nothing is). */
  private existing(full: string): Stats | undefined {
    if (this.fresh.has(dirname(full))) return undefined;
    return lstatSync(full, { throwIfNoEntry: false });
  }

  /** Whatever of another type is at `full` removed (a symlink always); whether `full` is now free. */
  private clear(full: string, entry: SnapshotEntry): { free: boolean } {
    const existing = this.existing(full);
    if (!existing) return { free: true };
    const sameType =
      (entry.type === 'dir' && existing.isDirectory()) ||
      (entry.type === 'file' && existing.isFile()) ||
      (entry.type === 'symlink' && existing.isSymbolicLink());
    if (sameType && entry.type !== 'symlink') return { free: false };
    rmSync(full, { recursive: true, force: true });
    return { free: true };
  }

  private parentReady(full: string): void {
    const parent = dirname(full);
    if (this.present.has(parent)) return;
    mkdirSync(parent, { recursive: true });
    this.present.add(parent);
  }
}

function writeAll(fd: number, data: Buffer): void {
  for (let at = 0; at < data.length; ) at += writeSync(fd, data, at, data.length - at);
}
