import { createHash, type Hash } from 'node:crypto';
import { type BigIntStats, constants, createReadStream, type Stats } from 'node:fs';
import {
  chmod,
  copyFile,
  lchown,
  lstat,
  lutimes,
  mkdir,
  readdir,
  readlink,
  rm,
  symlink,
  utimes,
} from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { decodeSnapshot, encodeSnapshot } from './snapshot-codec.js';
import type { CapturedEntry } from './snapshot-entry.js';
import { captureTree } from './tree-capture.js';

/**
 * A sandbox's files as plain directory trees on this node (a fork's same-node path, issue 30 §7):
 * copied file by file by the kernel (copyFile: a reflink where the file system has one, else
 * copy_file_range) instead of read, framed, compressed, hashed, inflated and written again by
 * this process. A copy holds what a capture of the same tree would: files, directories, symlinks,
 * owners, modes, times (to the millisecond the snapshot keeps); hard links become separate files.
 * A socket, fifo or device is refused (the stream capture skips them and the two must agree).
 * Node's own calls rather than `cp -a`: forking the service process to run a tool cost ~20 ms at
 * a 200 MB heap, more than copying 10 MB.
 */

/** What a copied tree holds, and a fingerprint of it that any later change to it alters. */
export interface TreeListing {
  entries: number;
  /** Bytes of its regular files. */
  bytes: number;
  /** SHA-256 of every path's type, inode, change time and size (listTree). */
  fingerprint: string;
}

/** Thrown for a tree a snapshot could not hold as it is (a socket, fifo or device in it). */
export class TreeNotCopyableError extends Error {
  override readonly name = 'TreeNotCopyableError';
}

/** Entries of one directory handled at once (each a few calls on libuv's thread pool). */
const BATCH = 32;

/**
 * `from`'s contents copied into the directory `to` (made if missing; `to`'s own owner, mode and
 * times are left as they are, as a stream restore leaves its directory).
 */
export async function copyTree(from: string, to: string): Promise<void> {
  await mkdir(to, { recursive: true });
  await copyChildren(from, to);
}

async function copyChildren(from: string, to: string): Promise<void> {
  const names = await readdir(from);
  for (let i = 0; i < names.length; i += BATCH)
    await Promise.all(names.slice(i, i + BATCH).map((name) => copyEntry(join(from, name), join(to, name))));
}

async function copyEntry(source: string, target: string): Promise<void> {
  const stats = await lstat(source);
  if (stats.isDirectory()) {
    await mkdir(target, { mode: 0o700 });
    await copyChildren(source, target);
    // After its children: adding them would change its times, and a read-only mode would stop them.
    await own(() => lchown(target, stats.uid, stats.gid));
    await chmod(target, stats.mode & 0o7777);
    await utimes(target, ...timesOf(stats));
  } else if (stats.isFile()) {
    await copyFile(source, target, constants.COPYFILE_FICLONE);
    await own(() => lchown(target, stats.uid, stats.gid));
    // After the owner: a chown clears set-user and set-group bits.
    await chmod(target, stats.mode & 0o7777);
    await utimes(target, ...timesOf(stats));
  } else if (stats.isSymbolicLink()) {
    await symlink(await readlink(source), target);
    await own(() => lchown(target, stats.uid, stats.gid));
    await lutimes(target, ...timesOf(stats));
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
async function own(chown: () => Promise<void>): Promise<void> {
  try {
    await chown();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
  }
}

/**
 * The tree's entries, bytes and fingerprint (metadata only, no content). The fingerprint covers
 * each path's inode and change time: writing, truncating, chmod-ing, touching or replacing any
 * file under `dir` changes it (the kernel sets the change time; no caller can set it back), so a
 * copy that differs from its listing was altered after it was made.
 */
export async function listTree(dir: string): Promise<TreeListing> {
  const hash = createHash('sha256');
  const listing = { entries: 0, bytes: 0 };
  await listInto(dir, '', hash, listing);
  return { ...listing, fingerprint: hash.digest('hex') };
}

async function listInto(
  dir: string,
  relative: string,
  hash: Hash,
  listing: { entries: number; bytes: number },
): Promise<void> {
  const names = (await readdir(dir)).sort();
  for (let i = 0; i < names.length; i += BATCH) {
    const batch = names.slice(i, i + BATCH);
    const stats = await Promise.all(batch.map((name) => lstat(join(dir, name), { bigint: true })));
    for (const [j, name] of batch.entries()) {
      const stat = stats[j] as BigIntStats;
      const path = relative ? `${relative}/${name}` : name;
      const type = stat.isDirectory() ? 'd' : stat.isFile() ? 'f' : stat.isSymbolicLink() ? 'l' : 'o';
      hash.update(`${path}\0${type} ${stat.ino} ${stat.ctimeNs} ${stat.size}\0`);
      listing.entries++;
      if (type === 'f') listing.bytes += Number(stat.size);
      if (type === 'd') await listInto(join(dir, name), path, hash, listing);
    }
  }
}

/**
 * Makes `target` hold exactly the tree `from` (a copyTree result): what `target` holds goes, then
 * `from`'s children are copied in. `target` itself stays, with its own owner, mode and times, as a
 * stream restore leaves it. Returns how many of `target`'s top-level names were removed.
 */
export async function replaceTreeContents(target: string, from: string): Promise<{ removed: number }> {
  const existing = await readdir(target);
  await Promise.all(existing.map((name) => rm(join(target, name), { recursive: true, force: true })));
  await copyChildren(from, target);
  return { removed: existing.length };
}

/**
 * A part with no plain-file form (a container layer, whose deletions are whiteouts) is copied as
 * a snapshot stream of its own entries, in this file under the copy's directory.
 */
export function streamPartFile(part: string): string {
  return `${part}.snapshot`;
}

/**
 * The snapshot stream of a copy (each part in order: the tree `<dir>/<part>`, or the stream
 * `<dir>/<part>.snapshot`): the same entries and bytes a capture of the sandbox would have
 * produced, read from the copy once the sandbox runs again.
 */
export function encodeCopiedTrees(dir: string, parts: readonly string[]): Readable {
  async function* entries(): AsyncGenerator<CapturedEntry> {
    for (const part of parts) {
      const stream = join(dir, streamPartFile(part));
      if (!(await lstat(stream).catch(() => undefined))) {
        yield* captureTree(join(dir, part), part);
        continue;
      }
      // Each entry's content is read out by the encoder before it asks for the next one.
      for await (const { entry, content } of decodeSnapshot(createReadStream(stream)))
        yield { entry, content: () => content };
    }
  }
  return encodeSnapshot(entries());
}
