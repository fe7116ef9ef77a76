import path from 'node:path';
import type { Readable } from 'node:stream';
import { chunkedReads } from './transfer-chunks.js';

/** How packTree names what it packs. */
export interface PackTreeOptions {
  /**
   * The top entry's name in the tar instead of `localPath`'s own: `docker cp f.txt id:/dir/g.txt`
   * sends f.txt as g.txt, unpacked into /dir.
   */
  name?: string;
}

/**
 * A tar stream of `localPath` as its top entry (a file or a directory, as `docker cp` sends it),
 * its files read a transfer chunk at a time; `onFile` is called for each regular file. Whoever
 * packs a tree for a transfer uses it: the SDK's upload, the agent's download.
 */
export async function packTree(
  localPath: string,
  onFile?: () => void,
  options: PackTreeOptions = {},
): Promise<Readable> {
  // Loaded on first use: most agents never transfer anything, and boot time counts.
  const { pack } = await import('tar-fs');
  const resolved = path.resolve(localPath);
  const top = path.basename(resolved);
  const rename = options.name !== undefined && options.name !== top ? options.name : undefined;
  if (rename !== undefined && (rename === '' || rename.includes('/') || rename === '..'))
    throw new Error(`packTree: name must be one path segment (got "${rename}")`);
  return pack(path.dirname(resolved), {
    entries: [top],
    fs: chunkedReads,
    ...(onFile || rename !== undefined
      ? {
          map: (header) => {
            if (header.type === 'file') onFile?.();
            if (rename !== undefined) header.name = rename + header.name.slice(top.length);
            return header;
          },
        }
      : {}),
  });
}
