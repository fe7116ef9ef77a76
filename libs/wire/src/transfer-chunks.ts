import fs from 'node:fs';
import { Limits } from './limits.js';

/**
 * tar-fs's file system for packing, reading each file a chunk at a time instead of node's 64 KiB:
 * sixteen times fewer reads and buffers per chunk sent (the transfer's throughput was bound by
 * CPU, much of it the garbage collector's). Whoever packs a tree for a transfer list uses it (the
 * SDK's upload, the agent's download).
 */
export const chunkedReads: typeof fs = {
  ...fs,
  createReadStream: ((file: string, options?: { start?: number; end?: number }) =>
    fs.createReadStream(file, {
      ...options,
      highWaterMark: Limits.transferChunkBytes,
    })) as typeof fs.createReadStream,
};

/**
 * Regroups a byte stream into chunks of exactly transferChunkBytes (the last one shorter), each
 * as the pieces it is made of, not joined: one Redis value each on a transfer list, written to
 * the socket piece by piece (RawListConnection), whoever sends (the SDK's upload, the agent's
 * download).
 */
export async function* chunkPieces(
  source: AsyncIterable<Buffer | string>,
  size: number = Limits.transferChunkBytes,
): AsyncGenerator<Buffer[]> {
  let parts: Buffer[] = [];
  let length = 0;
  for await (const piece of source) {
    let data = typeof piece === 'string' ? Buffer.from(piece) : piece;
    while (length + data.length >= size) {
      const take = size - length;
      parts.push(data.subarray(0, take));
      yield parts;
      parts = [];
      length = 0;
      data = data.subarray(take);
    }
    if (data.length > 0) {
      parts.push(data);
      length += data.length;
    }
  }
  if (length > 0) yield parts;
}

/**
 * Yields what `source` yields, asking it for the next item as soon as the current one is handed
 * over: producing a chunk (reading and packing files) overlaps with sending the one before,
 * instead of waiting for each Redis round trip. One item ahead, no more.
 */
export async function* readAhead<T>(source: AsyncIterable<T>): AsyncGenerator<T> {
  const iterator = source[Symbol.asyncIterator]();
  let next = iterator.next();
  let finished = false;
  try {
    for (;;) {
      const current = await next;
      if (current.done) {
        finished = true;
        return;
      }
      next = iterator.next();
      // Rejected while the consumer still holds the item: reported by the await above, or by
      // nobody when the consumer stops first.
      next.catch(() => {});
      yield current.value;
    }
  } finally {
    // The consumer stopped early (or failed): let the source clean up once its pending read settles.
    if (!finished)
      void next
        .then(
          () => iterator.return?.(),
          () => {},
        )
        .catch(() => {});
  }
}
