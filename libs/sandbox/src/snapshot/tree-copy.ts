import { createHash, type Hash } from 'node:crypto';
import { type BigIntStats, createReadStream } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { TreeCopyRequest } from './entry-writer-thread.js';
import { decodeSnapshot, encodeSnapshot } from './snapshot-codec.js';
import type { CapturedEntry } from './snapshot-entry.js';
import { captureTree } from './tree-capture.js';
import { TreeNotCopyableError } from './tree-copy-sync.js';
import { openSession } from './writer-thread.js';

export { TreeNotCopyableError };

/**
 * A sandbox's files as plain directory trees on this node (a fork's same-node path, issue 30 §7):
 * copied file by file by the kernel (copyFile: a reflink where the file system has one, else
 * copy_file_range) instead of read, framed, compressed, hashed, inflated and written again by
 * this process. A copy holds what a capture of the same tree would: files, directories, symlinks,
 * owners, modes, times (to the millisecond the snapshot keeps); hard links become separate files.
 * A socket, fifo or device is refused (the stream capture skips them and the two must agree).
 * Node's own calls rather than `cp -a`: forking the service process to run a tool cost ~20 ms at
 * a 200 MB heap, more than copying 10 MB. The copying runs on the restore's writer thread
 * (tree-copy-sync.ts).
 */

/** What a copied tree holds, and a fingerprint of it that any later change to it alters. */
export interface TreeListing {
  entries: number;
  /** Bytes of its regular files. */
  bytes: number;
  /** SHA-256 of every path's type, inode, change time and size (listTree). */
  fingerprint: string;
}

/** Entries of one directory listed at once (lstat calls on libuv's thread pool). */
const BATCH = 32;

/**
 * `from`'s contents copied into the directory `to` (made if missing; `to`'s own owner, mode and
 * times are left as they are, as a stream restore leaves its directory). On the writer thread.
 */
export async function copyTree(from: string, to: string): Promise<void> {
  await onWriterThread({ from, to, replace: false });
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
  return { removed: await onWriterThread({ from, to: target, replace: true }) };
}

/** One copy run on the process's writer thread (writer-thread.ts); resolves with the names removed. */
function onWriterThread(copy: TreeCopyRequest): Promise<number> {
  return new Promise((resolve, reject) => {
    const { session, send } = openSession({
      reply: (reply) => {
        send({ session, close: true }, []);
        if (!reply.error) resolve(reply.removed ?? 0);
        else if (reply.error.code === 'ENOTCOPYABLE') reject(new TreeNotCopyableError(reply.error.message));
        else reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
      },
      lost: reject,
    });
    send({ session, batch: 1, copy }, []);
  });
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
export function encodeCopiedTrees(
  dir: string,
  parts: readonly string[],
  options: { beforeEntry?: () => Promise<void> } = {},
): Readable {
  const { beforeEntry } = options;
  async function* entries(): AsyncGenerator<CapturedEntry> {
    for (const part of parts) {
      const stream = join(dir, streamPartFile(part));
      if (!(await lstat(stream).catch(() => undefined))) {
        for await (const captured of captureTree(join(dir, part), part)) {
          await beforeEntry?.();
          yield captured;
        }
        continue;
      }
      // Each entry's content is read out by the encoder before it asks for the next one.
      for await (const { entry, content } of decodeSnapshot(createReadStream(stream))) {
        await beforeEntry?.();
        yield { entry, content: () => content };
      }
    }
  }
  return encodeSnapshot(entries());
}
