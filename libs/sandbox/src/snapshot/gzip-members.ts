import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants, createGunzip, gunzip, gzip } from 'node:zlib';
import { ByteReader } from './byte-reader.js';

/**
 * Gzip members that carry their own compressed length, so a reader can cut the stream into
 * members without inflating it, and inflate several at once on the thread pool: one gunzip
 * stream kept a single core busy and was most of a restore's time (docs/benchmarks.md). The
 * length rides in the member header's extra field (RFC 1952 §2.3.1.1), as BGZF does for BAM
 * files: subfield `SN`, 4 bytes, the member's whole length, little-endian. Every gzip reader
 * skips extra fields, so the stream stays one that `gunzip` and `tar -xz` read; members
 * without it (snapshots made before) are inflated as one stream, in order.
 */
const ID1 = 0x1f;
const ID2 = 0x8b;
const DEFLATE = 8;
const FEXTRA = 0x04;
const SI1 = 0x53; // 'S'
const SI2 = 0x4e; // 'N'
/** The fixed header (10), XLEN (2), and the subfield: SI1 SI2, LEN (2), the length (4). */
const SIZED_HEADER_BYTES = 20;
const ZLIB_HEADER_BYTES = 10;
/** Members inflated at once: the thread pool has 4 threads; more would queue behind file writes. */
export const INFLATE_IN_FLIGHT = 4;
/** Output buffer of one member's inflate: its ISIZE, within these bounds (a damaged ISIZE allocates no more). */
const MIN_OUT_CHUNK = 64 * 1024;
const MAX_OUT_CHUNK = 4 << 20;

/** How a stream was inflated: read by the restore's log, and by tests. */
export interface InflateStats {
  /** Members cut by their recorded length and inflated on their own. */
  sizedMembers: number;
  /** Most of them inflating at once. */
  maxInFlight: number;
  /** Compressed bytes inflated as one stream, in order (members without a length). */
  streamedBytes: number;
}

export function newInflateStats(): InflateStats {
  return { sizedMembers: 0, maxInFlight: 0, streamedBytes: 0 };
}

const gzipAsync = (block: Buffer, level: number): Promise<Buffer> =>
  new Promise((resolve, reject) =>
    gzip(block, { level, memLevel: 9, chunkSize: 256 * 1024 }, (err, out) =>
      err ? reject(err) : resolve(out),
    ),
  );

const gunzipAsync = (member: Buffer, chunkSize: number): Promise<Buffer> =>
  new Promise((resolve, reject) =>
    gunzip(member, { chunkSize }, (err, out) => (err ? reject(err) : resolve(out))),
  );

/**
 * `block` compressed as one gzip member that records its own length: the header, then zlib's
 * member after its 10-byte header (the deflate data and the CRC-32/ISIZE trailer, which the
 * extra field does not change), handed out as two buffers, uncopied.
 */
export async function gzipSizedMember(block: Buffer, level: number): Promise<[Buffer, Buffer]> {
  const member = await gzipAsync(block, level);
  if (member[0] !== ID1 || member[1] !== ID2 || member[2] !== DEFLATE || member[3] !== 0)
    throw new Error('zlib wrote a gzip header with flags set: cannot add the member length');
  const length = member.length - ZLIB_HEADER_BYTES + SIZED_HEADER_BYTES;
  const header = Buffer.alloc(SIZED_HEADER_BYTES);
  member.copy(header, 0, 0, ZLIB_HEADER_BYTES);
  header[3] = FEXTRA;
  header.writeUInt16LE(8, 10);
  header[12] = SI1;
  header[13] = SI2;
  header.writeUInt16LE(4, 14);
  header.writeUInt32LE(length, 16);
  return [header, member.subarray(ZLIB_HEADER_BYTES)];
}

/** The member length a header records, or undefined when it records none. */
function recordedLength(header: Buffer): number | undefined {
  if (header[0] !== ID1 || header[1] !== ID2 || header[2] !== DEFLATE || header[3] !== FEXTRA)
    return undefined;
  if (header.readUInt16LE(10) !== 8 || header[12] !== SI1 || header[13] !== SI2) return undefined;
  if (header.readUInt16LE(14) !== 4) return undefined;
  const length = header.readUInt32LE(16);
  return length > SIZED_HEADER_BYTES ? length : undefined;
}

/**
 * The inflated bytes of a gzip stream, in order. Members that record their length are inflated
 * up to INFLATE_IN_FLIGHT at once (zlib's async calls run on libuv's thread pool); from the
 * first member that does not, the rest is inflated as one stream. Each member's CRC-32 and
 * length are checked by zlib; errors are zlib's (or name a member cut short).
 */
export async function* inflateMembers(
  compressed: AsyncIterable<Buffer> | Iterable<Buffer>,
  stats: InflateStats = newInflateStats(),
): AsyncGenerator<Buffer> {
  // Buffers in hand (an array) are read as well as a stream, as `for await` would.
  const source = Symbol.asyncIterator in compressed ? compressed : fromIterable(compressed);
  const reader = new ByteReader(source[Symbol.asyncIterator]());
  const queue: Promise<Buffer>[] = [];
  try {
    for (;;) {
      if (await reader.atEnd()) break;
      const header = await reader.peek(SIZED_HEADER_BYTES);
      const length = header && recordedLength(header);
      if (length === undefined) {
        while (queue.length > 0) yield await (queue.shift() as Promise<Buffer>);
        yield* inflateStream(reader.rest(), stats);
        return;
      }
      const member = await reader.read(length);
      if (!member)
        throw new Error(
          `the stream is truncated inside gzip member ${stats.sizedMembers + 1} (${length} bytes recorded)`,
        );
      const isize = member.readUInt32LE(member.length - 4);
      const inflated = gunzipAsync(member, Math.min(MAX_OUT_CHUNK, Math.max(MIN_OUT_CHUNK, isize)));
      // Awaited in its turn, or settled in the cleanup: never an unhandled rejection.
      inflated.catch(() => {});
      queue.push(inflated);
      stats.sizedMembers++;
      stats.maxInFlight = Math.max(stats.maxInFlight, queue.length);
      if (queue.length >= INFLATE_IN_FLIGHT) yield await (queue.shift() as Promise<Buffer>);
    }
    while (queue.length > 0) yield await (queue.shift() as Promise<Buffer>);
  } finally {
    await Promise.allSettled(queue);
  }
}

/** One gunzip over the rest (it reads concatenated members too). */
async function* inflateStream(rest: AsyncIterable<Buffer>, stats: InflateStats): AsyncGenerator<Buffer> {
  const counted = (async function* () {
    for await (const chunk of rest) {
      stats.streamedBytes += chunk.length;
      yield chunk;
    }
  })();
  const gunzipStream = createGunzip({ finishFlush: constants.Z_SYNC_FLUSH, chunkSize: 256 * 1024 });
  let inputError: Error | undefined;
  const feeding = pipeline(Readable.from(counted), gunzipStream).catch((err: Error) => {
    inputError = err;
  });
  for await (const chunk of gunzipStream) yield chunk as Buffer;
  await feeding;
  if (inputError) throw inputError;
}

async function* fromIterable(buffers: Iterable<Buffer>): AsyncGenerator<Buffer> {
  yield* buffers;
}
