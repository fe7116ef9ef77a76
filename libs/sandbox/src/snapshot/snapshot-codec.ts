import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { formatIssues } from '@sandstream/wire';
import { blockLevel } from './block-level.js';
import { ByteReader } from './byte-reader.js';
import { wasCheckedWhole } from './checked-whole.js';
import { gzipSizedMember, type InflateStats, inflateMembers, newInflateStats } from './gzip-members.js';
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
 * whole gzip-compressed (as a series of gzip members, see encodeSnapshot). Our own framing rather than tar: tar has no whiteout, and a trailer
 * with a checksum lets a restore refuse a truncated or altered snapshot by name.
 */
const MAGIC = Buffer.from('SANDSTREAM-SNAPSHOT 1\n');
const MAX_HEADER_BYTES = 64 * 1024;
/** gzip level 1: the bench (docs/benchmarks.md) compares against `tar | gzip -1` at this level. */
export const SNAPSHOT_GZIP_LEVEL = 1;
/** Bytes of frames compressed as one gzip member. */
const BLOCK_BYTES = 1 << 20;
/** Members compressed at once: one per thread of libuv's pool (4), as the restore inflates them. */
const PARALLEL_BLOCKS = 4;

/**
 * Compressed snapshot bytes from captured entries, read lazily: nothing is held whole. The frames
 * are cut into 1 MB blocks, each compressed as its own gzip member, four at once (one gzip
 * stream kept a single core busy and was most of a snapshot's time). Concatenated members are
 * one gzip stream to every reader (RFC 1952 §2.2): `decodeSnapshot` reads both layouts.
 */
export function encodeSnapshot(entries: AsyncIterable<CapturedEntry>): Readable {
  return Readable.from(compressBlocks(batched(frameEntries(entries))), {
    objectMode: false,
    highWaterMark: 1 << 20,
  });
}

/**
 * Each block compressed as a gzip member that records its length (gzip-members.ts), up to
 * PARALLEL_BLOCKS at once, handed out in order; a block that looks incompressible is stored
 * (block-level.ts).
 */
async function* compressBlocks(blocks: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  const queue: Promise<Buffer[]>[] = [];
  try {
    for await (const block of blocks) {
      const member = gzipSizedMember(block, blockLevel(block, SNAPSHOT_GZIP_LEVEL));
      // Awaited in its turn, or settled in the cleanup: never an unhandled rejection.
      member.catch(() => {});
      queue.push(member);
      if (queue.length >= PARALLEL_BLOCKS) yield* await (queue.shift() as Promise<Buffer[]>);
    }
    while (queue.length > 0) yield* await (queue.shift() as Promise<Buffer[]>);
  } finally {
    await Promise.allSettled(queue);
  }
}

/** Frames (headers, small files, 1 MB pieces of large ones) joined into blocks of at least 1 MB. */
async function* batched(frames: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  let pending: Buffer[] = [];
  let size = 0;
  for await (const frame of frames) {
    pending.push(frame);
    size += frame.length;
    if (size >= BLOCK_BYTES) {
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
 * compression, a truncated stream (with where it ends), a bad header, a checksum mismatch. The
 * end marker's checksum is not computed for bytes the caller checked whole against their
 * recorded SHA-256 (checked-whole.ts): those are the encoder's own.
 */
export async function* decodeSnapshot(
  compressed: AsyncIterable<Buffer> | Iterable<Buffer>,
  stats: InflateStats = newInflateStats(),
): AsyncGenerator<RestoredEntry> {
  const inflated = inflateMembers(compressed, stats);
  const reader = new ByteReader(inflated);
  const hash = wasCheckedWhole(compressed) ? undefined : createHash('sha256');
  const wrap = async <T>(what: () => Promise<T>): Promise<T> => {
    try {
      return await what();
    } catch (err) {
      if (err instanceof SnapshotCorruptError) throw err;
      throw new SnapshotCorruptError(`snapshot compressed data is damaged: ${(err as Error).message}`);
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
      const digest = hash?.digest('hex');
      if (trailer.data.entries !== count)
        throw new SnapshotCorruptError(
          `snapshot end marker counts ${trailer.data.entries} entries, the stream held ${count}`,
        );
      if (digest !== undefined && trailer.data.sha256 !== digest)
        throw new SnapshotCorruptError(
          `snapshot checksum mismatch: its content hashes to SHA-256 ${digest}, its end marker says ${trailer.data.sha256}`,
        );
      // Whatever follows the end marker is read too: a damaged tail is still refused.
      if (!(await wrap(() => reader.atEnd())))
        throw new SnapshotCorruptError('snapshot has bytes after its end marker: damaged');
      return;
    }
    hash?.update(length);
    hash?.update(raw);
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
