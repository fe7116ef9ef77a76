import { chmod, lchown, lstat, lutimes, mkdir, open, readdir, rm, symlink, utimes } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RestoredEntry, SnapshotEntry } from './snapshot-entry.js';

/** What a restore did, for the reply and the logs. */
export interface RestoreCounts {
  entries: number;
  bytes: number;
  removed: number;
}

/**
 * Writes one entry at `full`: whatever is there of another type goes first; a file is written
 * whole; owner, mode and times as recorded. Directory times are left to `finishDirectories`
 * (writing their children changes them).
 */
export async function applyEntry(
  full: string,
  { entry, content }: RestoredEntry,
  dirs: Array<{ full: string; entry: SnapshotEntry }>,
): Promise<number> {
  const existing = await lstat(full).catch(() => undefined);
  if (entry.type === 'whiteout') {
    if (existing) await rm(full, { recursive: true, force: true });
    return 0;
  }
  const sameType =
    existing &&
    ((entry.type === 'dir' && existing.isDirectory()) ||
      (entry.type === 'file' && existing.isFile()) ||
      (entry.type === 'symlink' && existing.isSymbolicLink()));
  if (existing && (!sameType || entry.type === 'symlink')) await rm(full, { recursive: true, force: true });
  await mkdir(dirname(full), { recursive: true });
  let bytes = 0;
  if (entry.type === 'dir') {
    if (!existing || !sameType) await mkdir(full);
    dirs.push({ full, entry });
  } else if (entry.type === 'symlink') {
    await symlink(entry.target ?? '', full);
  } else {
    // Truncated in place (not unlinked): a process holding the file open sees the restored bytes.
    const handle = await open(full, 'w', entry.mode);
    try {
      for await (const chunk of content) {
        await handle.write(chunk);
        bytes += chunk.length;
      }
    } finally {
      await handle.close();
    }
  }
  await lchown(full, entry.uid, entry.gid).catch(ignoreUnprivileged);
  if (entry.type !== 'symlink') {
    await chmod(full, entry.mode);
    if (entry.type === 'file') await utimes(full, entry.mtimeMs / 1000, entry.mtimeMs / 1000);
  } else {
    await lutimes(full, entry.mtimeMs / 1000, entry.mtimeMs / 1000).catch(() => {});
  }
  return bytes;
}

/** Directory modes and times, deepest first, once nothing will be written into them any more. */
export async function finishDirectories(dirs: Array<{ full: string; entry: SnapshotEntry }>): Promise<void> {
  for (const { full, entry } of dirs.reverse()) {
    await chmod(full, entry.mode);
    await utimes(full, entry.mtimeMs / 1000, entry.mtimeMs / 1000);
  }
}

/**
 * Makes `dir` hold exactly the entries of one part (paths `<prefix>/…`): entries written as they
 * stream in, then everything the snapshot did not name removed. `dir` itself stays.
 */
export class TreeRestore {
  private readonly seen = new Set<string>();
  private readonly dirs: Array<{ full: string; entry: SnapshotEntry }> = [];
  readonly counts: RestoreCounts = { entries: 0, bytes: 0, removed: 0 };

  constructor(
    private readonly dir: string,
    private readonly prefix: string,
  ) {}

  async apply(restored: RestoredEntry): Promise<void> {
    const relative = restored.entry.path.slice(this.prefix.length + 1);
    this.seen.add(relative);
    this.counts.entries++;
    this.counts.bytes += await applyEntry(join(this.dir, relative), restored, this.dirs);
  }

  /** Removes what the snapshot did not hold, then sets directory modes and times. */
  async finish(): Promise<RestoreCounts> {
    await mkdir(this.dir, { recursive: true });
    await this.removeUnseen(this.dir, '');
    await finishDirectories(this.dirs);
    return this.counts;
  }

  private async removeUnseen(dir: string, relative: string): Promise<void> {
    for (const name of await readdir(dir)) {
      const rel = relative ? `${relative}/${name}` : name;
      const full = join(dir, name);
      if (!this.seen.has(rel)) {
        await rm(full, { recursive: true, force: true });
        this.counts.removed++;
      } else if ((await lstat(full)).isDirectory()) {
        await this.removeUnseen(full, rel);
      }
    }
  }
}

function ignoreUnprivileged(err: NodeJS.ErrnoException): void {
  // Not root (an in-process sandbox of an ordinary user): files keep this user as owner.
  if (err.code !== 'EPERM') throw err;
}
