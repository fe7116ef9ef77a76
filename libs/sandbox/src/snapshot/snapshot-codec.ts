import { createHash, type Hash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants, createGunzip, createGzip } from 'node:zlib';
import { formatIssues } from '@sandstream/wire';
import {
  type CapturedEntry,
  type RestoredEntry,
  SnapshotCorruptError,
  SnapshotEntrySchema,
  SnapshotTrailerSchema,
} from './snapshot-entry.js';

/**
 * The snapshot stream: a magic line, then frames `<u32 BE header length><JSON header><content>`,
 * the last one a trailer with the entry count and the SHA-256 of everything before it; the
 * whole gzip-compressed. Our own framing rather than tar: tar has no whiteout, and a trailer
 * with a checksum lets a restore refuse a truncated or altered snapshot by name.
 */
const MAGIC = Buffer.from('SANDSTREAM-SNAPSHOT 1\n');
const MAX_HEADER_BYTES = 64 * 1024;
/** gzip level 1: the bench (docs/benchmarks.md) compares against `tar | gzip -1` at this level. */
export const SNAPSHOT_GZIP_LEVEL = 1;

/** Compressed snapshot bytes from captured entries, read lazily: nothing is held whole. */
export function encodeSnapshot(entries: AsyncIterable<CapturedEntry>): Readable {
  const gzip = createGzip({ level: SNAPSHOT_GZIP_LEVEL, memLevel: 9, chunkSize: 256 * 1024 });
  const frames = Readable.from(batched(frameEntries(entries)), { objectMode: false, highWaterMark: 1 << 20 });
  pipeline(frames, gzip).catch(() => {
    // pipeline destroys gzip with the error: its reader sees it.
  });
  return gzip;
}

/** Small frames (headers, small files) joined into 256 KB pieces: one compressor call each, not one per header. */
async function* batched(frames: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const BATCH = 256 * 1024;
  let pending: Buffer[] = [];
  let size = 0;
  for await (const frame of frames) {
    pending.push(frame);
    size += frame.length;
    if (size >= BATCH) {
      yield pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, size);
      pending = [];
      size = 0;
    }
  }
  if (size > 0) yield Buffer.concat(pending, size);
}

async function* frameEntries(entries: AsyncIterable<CapturedEntry>): AsyncGenerator<Buffer> {
  const hash = createHash('sha256');
  const out = (chunk: Buffer): Buffer => {
    hash.update(chunk);
    return chunk;
  };
  yield out(MAGIC);
  let count = 0;
  for await (const { entry, content } of entries) {
    const header = Buffer.from(JSON.stringify(entry));
    const length = Buffer.alloc(4);
    length.writeUInt32BE(header.length);
    yield out(Buffer.concat([length, header]));
    if (entry.type === 'file') {
      let written = 0;
      if (content) {
        for await (const chunk of content()) {
          const part = chunk.subarray(0, Math.max(0, entry.size - written));
          written += part.length;
          if (part.length > 0) yield out(part);
        }
      }
      // A file that shrank while it was read (a writer outside the freeze): padded, so the frame
      // stays whole; the capture is as consistent as its freeze.
      if (written < entry.size) yield out(Buffer.alloc(entry.size - written));
    }
    count++;
  }
  const trailer = Buffer.from(JSON.stringify({ type: 'end', entries: count, sha256: hash.digest('hex') }));
  const length = Buffer.alloc(4);
  length.writeUInt32BE(trailer.length);
  yield Buffer.concat([length, trailer]);
}

/**
 * Entries from compressed snapshot bytes. Each entry's content must be read (or is skipped) before
 * the next one is asked for. Throws SnapshotCorruptError naming what is wrong: damaged
 * compression, a truncated stream (with where it ends), a bad header, a checksum mismatch.
 */
export async function* decodeSnapshot(compressed: AsyncIterable<Buffer>): AsyncGenerator<RestoredEntry> {
  const gunzip = createGunzip({ finishFlush: constants.Z_SYNC_FLUSH });
  let inputError: Error | undefined;
  const feeding = pipeline(Readable.from(compressed), gunzip).catch((err: Error) => {
    inputError = err;
  });
  const reader = new ByteReader(gunzip[Symbol.asyncIterator]() as AsyncIterator<Buffer>);
  const hash = createHash('sha256');
  const wrap = async <T>(what: () => Promise<T>): Promise<T> => {
    try {
      return await what();
    } catch (err) {
      if (err instanceof SnapshotCorruptError) throw err;
      const message = (inputError ?? (err as Error)).message;
      throw new SnapshotCorruptError(`snapshot compressed data is damaged: ${message}`);
    }
  };
  const magic = await wrap(() => reader.read(MAGIC.length, hash));
  if (!magic?.equals(MAGIC)) throw new SnapshotCorruptError('not a Sandstream snapshot (bad magic line)');
  let count = 0;
  for (;;) {
    const where = `after ${count} entries`;
    const length = await wrap(() => reader.read(4));
    if (!length)
      throw new SnapshotCorruptError(`snapshot is truncated: it ends ${where} without its end marker`);
    const size = length.readUInt32BE();
    if (size > MAX_HEADER_BYTES)
      throw new SnapshotCorruptError(
        `snapshot header ${count + 1} is ${size} bytes (at most ${MAX_HEADER_BYTES}): damaged`,
      );
    const raw = await wrap(() => reader.read(size));
    if (!raw) throw new SnapshotCorruptError(`snapshot is truncated: it ends inside header ${count + 1}`);
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new SnapshotCorruptError(`snapshot header ${count + 1} is not JSON: damaged`);
    }
    if ((json as { type?: unknown }).type === 'end') {
      const trailer = SnapshotTrailerSchema.safeParse(json);
      if (!trailer.success)
        throw new SnapshotCorruptError(formatIssues(trailer.error, 'snapshot end marker'));
      const digest = hash.digest('hex');
      if (trailer.data.entries !== count)
        throw new SnapshotCorruptError(
          `snapshot end marker counts ${trailer.data.entries} entries, the stream held ${count}`,
        );
      if (trailer.data.sha256 !== digest)
        throw new SnapshotCorruptError(
          `snapshot checksum mismatch: its content hashes to SHA-256 ${digest}, its end marker says ${trailer.data.sha256}`,
        );
      await feeding;
      if (inputError)
        throw new SnapshotCorruptError(`snapshot compressed data is damaged: ${inputError.message}`);
      return;
    }
    hash.update(length);
    hash.update(raw);
    const parsed = SnapshotEntrySchema.safeParse(json);
    if (!parsed.success)
      throw new SnapshotCorruptError(formatIssues(parsed.error, `snapshot entry ${count + 1}`));
    const entry = parsed.data;
    let remaining = entry.type === 'file' ? entry.size : 0;
    const content = (async function* () {
      while (remaining > 0) {
        const chunk = await wrap(() => reader.readUpTo(Math.min(remaining, 1 << 20), hash));
        if (!chunk)
          throw new SnapshotCorruptError(
            `snapshot is truncated: it ends inside ${entry.path} (${remaining} of ${entry.size} bytes missing)`,
          );
        remaining -= chunk.length;
        yield chunk;
      }
    })();
    yield { entry, content };
    // The caller skipped (part of) the content: read past it so the next header lines up.
    for await (const _ of content) {
    }
    count++;
  }
}

/** Exact-length reads over a stream of buffers, hashing what it hands out when asked. */
class ByteReader {
  private buffered: Buffer[] = [];
  private length = 0;
  private done = false;

  constructor(private readonly source: AsyncIterator<Buffer>) {}

  /** Exactly n bytes, or undefined when the stream ends first. */
  async read(n: number, hash?: Hash): Promise<Buffer | undefined> {
    while (this.length < n && !this.done) await this.pull();
    if (this.length < n) return undefined;
    return this.take(n, hash);
  }

  /** Between 1 and n bytes, or undefined at the end. */
  async readUpTo(n: number, hash?: Hash): Promise<Buffer | undefined> {
    if (this.length === 0 && !this.done) await this.pull();
    while (this.length === 0 && !this.done) await this.pull();
    if (this.length === 0) return undefined;
    return this.take(Math.min(n, this.length), hash);
  }

  private async pull(): Promise<void> {
    const next = await this.source.next();
    if (next.done) this.done = true;
    else if (next.value.length > 0) {
      this.buffered.push(next.value);
      this.length += next.value.length;
    }
  }

  private take(n: number, hash?: Hash): Buffer {
    const all = this.buffered.length === 1 ? (this.buffered[0] as Buffer) : Buffer.concat(this.buffered);
    const out = all.subarray(0, n);
    const rest = all.subarray(n);
    this.buffered = rest.length > 0 ? [rest] : [];
    this.length = rest.length;
    hash?.update(out);
    return out;
  }
}
