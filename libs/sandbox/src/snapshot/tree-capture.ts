import type { Stats } from 'node:fs';
import { lstat, open, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { prefetchContent } from './prefetch-content.js';
import { readSmallFile } from './small-file-io.js';
import type { CapturedEntry, SnapshotEntry } from './snapshot-entry.js';

/** Header fields every entry takes from lstat. */
export function entryOf(path: string, stats: Stats): Omit<SnapshotEntry, 'type' | 'size'> {
  return {
    path,
    mode: stats.mode & 0o7777,
    uid: stats.uid,
    gid: stats.gid,
    mtimeMs: Math.floor(stats.mtimeMs),
  };
}

const READ_CHUNK = 1 << 20;
/** Files up to this size can be read whole ahead of their turn (prefetchContent). */
const READ_AHEAD_BYTES = 256 * 1024;

/**
 * A file's content, read when the encoder reaches it, 1 MB at a time (never the whole file in
 * memory). Buffers sized to what is left: a stream's 1 MB buffer per small file cost 6x the time.
 */
export function fileContent(path: string, size: number): () => AsyncIterable<Buffer> {
  return async function* () {
    const handle = await open(path, 'r');
    try {
      for (let left = size; left > 0; ) {
        const { bytesRead, buffer } = await handle.read({
          buffer: Buffer.allocUnsafe(Math.min(left, READ_CHUNK)),
        });
        if (bytesRead === 0) return;
        left -= bytesRead;
        yield bytesRead === buffer.length ? buffer : buffer.subarray(0, bytesRead);
      }
    } finally {
      await handle.close();
    }
  };
}

/** lstat calls at once while a directory is listed. */
const LSTAT_BATCH = 64;

/**
 * Every file, directory and symlink under `dir` (not `dir` itself), depth first in name order,
 * as entries under `prefix`. Sockets, fifos and devices are skipped (a restore could not make
 * them mean the same); hard links become separate files. Small files are read ahead
 * (prefetchContent): by the time this ends, every byte it hands out has been read.
 */
export function captureTree(dir: string, prefix: string): AsyncGenerator<CapturedEntry> {
  return prefetchContent(walkTree(dir, prefix));
}

async function* walkTree(dir: string, prefix: string): AsyncGenerator<CapturedEntry> {
  let names: string[];
  try {
    names = (await readdir(dir)).sort();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  // A directory's names are lstat'ed a batch at a time: one after another, 10,000 small files
  // waited on 10,000 round trips to the thread pool in turn.
  for (let from = 0; from < names.length; from += LSTAT_BATCH) {
    const batch = names.slice(from, from + LSTAT_BATCH);
    const stats = await Promise.all(
      batch.map((name) =>
        lstat(join(dir, name)).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'ENOENT') return undefined;
          throw err;
        }),
      ),
    );
    for (const [i, name] of batch.entries()) {
      const stat = stats[i];
      if (!stat) continue;
      const full = join(dir, name);
      const path = `${prefix}/${name}`;
      yield* capturePath(full, path, stat);
      if (stat.isDirectory()) yield* walkTree(full, path);
    }
  }
}

/** One path's entry (no children): what the overlay capture shares with the tree capture. */
export async function* capturePath(full: string, path: string, stats: Stats): AsyncGenerator<CapturedEntry> {
  if (stats.isDirectory()) yield { entry: { ...entryOf(path, stats), type: 'dir', size: 0 } };
  else if (stats.isSymbolicLink())
    yield { entry: { ...entryOf(path, stats), type: 'symlink', size: 0, target: await readlink(full) } };
  else if (stats.isFile())
    yield {
      entry: { ...entryOf(path, stats), type: 'file', size: stats.size },
      content: fileContent(full, stats.size),
      ...(stats.size <= READ_AHEAD_BYTES ? { readWhole: () => readSmallFile(full, stats.size) } : {}),
    };
}
