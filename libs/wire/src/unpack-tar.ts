import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extractWithGnuTar, findGnuTar } from './gnu-tar.js';

/** Which unpacker to use: GNU tar when `gnuTar` finds one (the default looks on PATH), else tar-fs. */
export interface UnpackOptions {
  gnuTar?: () => Promise<string | null>;
}

/**
 * Unpacks a tar stream (a transfer's chunks) into the directory `dest`: with GNU tar where there
 * is one (several times less CPU), else with tar-fs. Either refuses members that would land
 * outside `dest` (`..`, writes through a link; an absolute name lands inside it); tar-fs also
 * refuses links that point out of it, which GNU tar creates, as `docker cp` does. Whoever unpacks
 * a transfer uses it: the agent's upload, the SDK's downloadTo. Resolves with the count of
 * regular files.
 */
export async function unpackTar(
  chunks: AsyncIterable<Buffer>,
  dest: string,
  options: UnpackOptions = {},
): Promise<number> {
  const tar = await (options.gnuTar ?? findGnuTar)();
  return tar ? (await extractWithGnuTar(tar, chunks, dest)).files : extractWithTarFs(chunks, dest);
}

async function extractWithTarFs(chunks: AsyncIterable<Buffer>, dest: string): Promise<number> {
  let files = 0;
  // Loaded on first use: most agents never transfer anything, and boot time counts.
  const { extract } = await import('tar-fs');
  // Two chunks at most wait here for the unpacker (Readable.from would hold sixteen).
  const source = Readable.from(chunks, { highWaterMark: 2 });
  const target = extract(dest, {
    mapStream: (stream, header) => {
      if (header.type === 'file') files += 1;
      return stream;
    },
  });
  // pipeline reports the first error; a stream torn down after it may still emit one, and an
  // 'error' with no listener would take the whole process down. That includes each entry's
  // stream: tar-fs pipes it only after checking and creating its directory, and an entry
  // destroyed in between (a limit tripped, the sender went away) has no listener yet.
  source.on('error', () => {});
  target.on('error', () => {});
  target.on('entry', (_header, entry: NodeJS.EventEmitter) => entry.on('error', () => {}));
  await pipeline(source, target);
  return files;
}
