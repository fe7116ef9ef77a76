import path from 'node:path';
import type { Readable } from 'node:stream';
import { chunkedReads } from './transfer-chunks.js';

/**
 * A tar stream of `localPath` as its top entry (a file or a directory, as `docker cp` sends it),
 * its files read a transfer chunk at a time; `onFile` is called for each regular file. Whoever
 * packs a tree for a transfer uses it: the SDK's upload, the agent's download.
 */
export async function packTree(localPath: string, onFile?: () => void): Promise<Readable> {
  // Loaded on first use: most agents never transfer anything, and boot time counts.
  const { pack } = await import('tar-fs');
  const resolved = path.resolve(localPath);
  return pack(path.dirname(resolved), {
    entries: [path.basename(resolved)],
    fs: chunkedReads,
    ...(onFile
      ? {
          map: (header) => {
            if (header.type === 'file') onFile();
            return header;
          },
        }
      : {}),
  });
}
