import {
  chmodSync,
  constants,
  copyFileSync,
  lchownSync,
  lstatSync,
  lutimesSync,
  mkdirSync,
  readdirSync,
  readlinkSync,
  rmSync,
  type Stats,
  symlinkSync,
  utimesSync,
} from 'node:fs';
import { join } from 'node:path';

/**
 * The copying of tree-copy.ts, with blocking calls in a row, run on the restore's writer thread
 * (entry-writer-thread.ts): on libuv's four pool threads each file's five calls queued behind the
 * snapshot's upload (its reads and gzip members) that runs beside a fork's restore.
 */

/** Thrown for a tree a snapshot could not hold as it is (a socket, fifo or device in it). */
export class TreeNotCopyableError extends Error {
  override readonly name = 'TreeNotCopyableError';
  readonly code = 'ENOTCOPYABLE';
}

/** `from`'s contents into the directory `to` (made if missing; its own owner, mode and times left). */
export function copyTreeSync(from: string, to: string): void {
  mkdirSync(to, { recursive: true });
  copyChildren(from, to);
}

/** What `target` holds removed, then `from`'s children copied in; returns how many names went. */
export function replaceTreeContentsSync(target: string, from: string): number {
  const existing = readdirSync(target);
  for (const name of existing) rmSync(join(target, name), { recursive: true, force: true });
  copyChildren(from, target);
  return existing.length;
}

function copyChildren(from: string, to: string): void {
  for (const name of readdirSync(from)) copyEntry(join(from, name), join(to, name));
}

function copyEntry(source: string, target: string): void {
  const stats = lstatSync(source);
  if (stats.isDirectory()) {
    mkdirSync(target, { mode: 0o700 });
    copyChildren(source, target);
    // After its children: adding them would change its times, and a read-only mode would stop them.
    own(() => lchownSync(target, stats.uid, stats.gid));
    chmodSync(target, stats.mode & 0o7777);
    utimesSync(target, ...timesOf(stats));
  } else if (stats.isFile()) {
    copyFileSync(source, target, constants.COPYFILE_FICLONE);
    own(() => lchownSync(target, stats.uid, stats.gid));
    // After the owner: a chown clears set-user and set-group bits.
    chmodSync(target, stats.mode & 0o7777);
    utimesSync(target, ...timesOf(stats));
  } else if (stats.isSymbolicLink()) {
    symlinkSync(readlinkSync(source), target);
    own(() => lchownSync(target, stats.uid, stats.gid));
    lutimesSync(target, ...timesOf(stats));
  } else {
    throw new TreeNotCopyableError(
      `${source} is a socket, fifo or device, which a snapshot does not hold: the tree is captured as a stream instead`,
    );
  }
}

/**
 * Access and change times in seconds, at the middle of their millisecond: a snapshot keeps
 * milliseconds, and seconds as a double lose the last bits (a time set at 056 ms read back as
 * 055.999…, one millisecond off once floored, as the stream capture floors it).
 */
function timesOf(stats: Stats): [number, number] {
  return [(Math.floor(stats.atimeMs) + 0.5) / 1000, (Math.floor(stats.mtimeMs) + 0.5) / 1000];
}

/** Not root (an in-process sandbox of an ordinary user): the copy keeps this user as owner. */
function own(chown: () => void): void {
  try {
    chown();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
  }
}
