import { lstat, readdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Bytes a directory tree occupies on its filesystem (allocated blocks, like `du`, so a sparse
 * file counts what it holds, not its length), each inode once. Entries that vanish during the
 * walk are skipped: the tree belongs to a running sandbox. An absent directory is 0.
 */
export async function allocatedBytes(root: string): Promise<number> {
  const seen = new Set<string>();
  let total = 0;
  const walk = async (dir: string): Promise<void> => {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch {
      return;
    }
    for (const name of names) {
      const path = join(dir, name);
      const st = await lstat(path, { bigint: false }).catch(() => undefined);
      if (!st) continue;
      if (st.nlink > 1) {
        const key = `${st.dev}:${st.ino}`;
        if (seen.has(key)) continue;
        seen.add(key);
      }
      total += st.blocks * 512;
      if (st.isDirectory()) await walk(path);
    }
  };
  const top = await lstat(root).catch(() => undefined);
  if (!top?.isDirectory()) return 0;
  await walk(root);
  return total;
}
