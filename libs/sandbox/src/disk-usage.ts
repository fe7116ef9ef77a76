import { execFile } from 'node:child_process';
import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Entries a tree may hold to be measured by a walk in this process; a larger one goes to `du`.
 * A child process costs its parent tens of ms of CPU on a small VM (a fork of a large process),
 * far more than a few hundred lstat calls, and most sandboxes' layers and work trees are small.
 */
export const WALK_ENTRIES_MAX = 256;

/**
 * Bytes a directory tree occupies on its filesystem (allocated blocks, so a sparse file counts
 * what it holds, not its length; each inode once). A small tree is walked here; a larger one is
 * measured by `du -s -B1 -x` where the host has it: on a tree of 25k files it took 0.1 s where a
 * walk in Node took 1.3 to 4.8 s on this 2-core machine (docs/sandbox-backends.md, "Disk"). An
 * absent directory is 0.
 */
export async function allocatedBytes(root: string): Promise<number> {
  const top = await lstat(root).catch(() => undefined);
  if (!top?.isDirectory()) return 0;
  const small = await walkBytes(root, WALK_ENTRIES_MAX);
  if (small !== undefined) return small;
  const fromDu = await duBytes(root);
  return fromDu ?? (walkBytes(root) as Promise<number>);
}

/**
 * GNU du exits 1 when files vanish under it (the tree belongs to a running sandbox) but still
 * prints its total: the number is taken whenever there is one. Undefined without du.
 */
function duBytes(root: string): Promise<number | undefined> {
  return new Promise((resolve) => {
    execFile('du', ['-s', '-B1', '-x', root], { maxBuffer: 1 << 20 }, (_err, stdout) => {
      const bytes = Number(String(stdout).split(/\s/)[0]);
      resolve(String(stdout).trim() !== '' && Number.isFinite(bytes) ? bytes : undefined);
    });
  });
}

/**
 * The same in Node (a small tree, or a host without GNU du); entries that vanish during the walk
 * are skipped. With `maxEntries`, undefined as soon as the tree holds more than that.
 */
export async function walkBytes(root: string): Promise<number>;
export async function walkBytes(root: string, maxEntries: number): Promise<number | undefined>;
export async function walkBytes(
  root: string,
  maxEntries = Number.POSITIVE_INFINITY,
): Promise<number | undefined> {
  const seen = new Set<string>();
  // As `du -s -x`: the root's own blocks count, and nothing on another filesystem.
  const top = await lstat(root).catch(() => undefined);
  if (!top) return 0;
  let total = top.blocks * 512;
  let entries = 0;
  const walk = async (dir: string): Promise<boolean> => {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      return true;
    }
    entries += names.length;
    if (entries > maxEntries) return false;
    for (const name of names) {
      const path = join(dir, name);
      const st = await lstat(path).catch(() => undefined);
      if (!st || st.dev !== top.dev) continue;
      if (st.nlink > 1 && !st.isDirectory()) {
        const key = `${st.dev}:${st.ino}`;
        if (seen.has(key)) continue;
        seen.add(key);
      }
      total += st.blocks * 512;
      if (st.isDirectory() && !(await walk(path))) return false;
    }
    return true;
  };
  return (await walk(root)) ? total : undefined;
}
