import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Limits } from '@sandstream/wire';
import { tarOfFile } from './single-file-tar.js';
import type { SandboxTransport } from './transport.js';

/** What `files.write` takes: text, bytes, or a stream of bytes (Node or web). */
export type FileContent = string | Uint8Array | Readable | ReadableStream<Uint8Array>;

/**
 * A streamed write: spooled to a local temporary file first (a tar entry needs its size up
 * front, and memory must stay bounded), then sent whole by writeFile when it fits the write
 * limit (atomic), else as a one-file tar upload into the file's directory.
 */
export async function writeStream(
  sandboxId: string,
  transport: SandboxTransport,
  path: string,
  content: Readable | ReadableStream<Uint8Array>,
  mode: number | undefined,
): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), 'sandstream-write-'));
  const spool = join(dir, 'content');
  try {
    await pipeline(content as AsyncIterable<Uint8Array>, createWriteStream(spool));
    const { size } = await stat(spool);
    if (size <= Limits.writeFileMaxBytes) {
      return await transport.writeFile(sandboxId, path, await readFile(spool), mode);
    }
    const tar = tarOfFile(posix.basename(path), size, mode ?? 0o644, createReadStream(spool));
    await transport.upload(sandboxId, tar, posix.dirname(path), undefined);
    return size;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
