import { Limits } from './limits.js';

/**
 * Regroups a byte stream into chunks of exactly transferChunkBytes (the last one shorter): one
 * Redis value each on a transfer list, whoever sends (the SDK's upload, the agent's download).
 */
export async function* rechunk(
  source: AsyncIterable<Buffer | string>,
  size: number = Limits.transferChunkBytes,
): AsyncGenerator<Buffer> {
  let parts: Buffer[] = [];
  let length = 0;
  for await (const piece of source) {
    let data = typeof piece === 'string' ? Buffer.from(piece) : piece;
    while (length + data.length >= size) {
      const take = size - length;
      parts.push(data.subarray(0, take));
      yield Buffer.concat(parts);
      parts = [];
      length = 0;
      data = data.subarray(take);
    }
    if (data.length > 0) {
      parts.push(data);
      length += data.length;
    }
  }
  if (length > 0) yield Buffer.concat(parts);
}
