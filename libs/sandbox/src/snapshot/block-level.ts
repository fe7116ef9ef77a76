/**
 * The gzip level for one block of a snapshot: the snapshot's level, or 0 (stored, a copy) when
 * the block looks incompressible. Random and already-compressed bytes (archives, images, model
 * weights) cost gzip -1 as much CPU as text does, to save nothing (10 MB of random bytes took
 * 244 ms of a fork's frozen capture, docs/benchmarks.md); stored, they are copied and checksummed
 * only, and the restore copies them back. Stored deflate is still gzip: every reader reads it.
 */

/** Bits per byte from which a block is stored: random bytes measure ~7.99 on these samples, text 4–6. */
const STORED_FROM_BITS = 7.9;
/** Samples spread over the block, so a block that is only partly random is still compressed. */
const SAMPLES = 8;
const SAMPLE_BYTES = 2048;

export function blockLevel(block: Buffer, level: number): number {
  if (level === 0 || block.length < SAMPLES * SAMPLE_BYTES) return level;
  return sampledEntropyBits(block) >= STORED_FROM_BITS ? 0 : level;
}

/**
 * Order-0 entropy (Shannon, bits per byte) of SAMPLES evenly spaced pieces of `block`. It sees
 * no repeats (a random piece repeated within deflate's 32 KB window would compress and is stored
 * anyway): the price is a larger snapshot of such a block, never a wrong one.
 */
export function sampledEntropyBits(block: Buffer): number {
  const counts = new Uint32Array(256);
  const stride = Math.floor((block.length - SAMPLE_BYTES) / (SAMPLES - 1));
  for (let s = 0; s < SAMPLES; s++) {
    const from = s * stride;
    for (let i = from; i < from + SAMPLE_BYTES; i++) {
      const byte = block[i] as number;
      counts[byte] = (counts[byte] as number) + 1;
    }
  }
  const total = SAMPLES * SAMPLE_BYTES;
  let bits = 0;
  for (const count of counts) {
    if (count === 0) continue;
    const p = count / total;
    bits -= p * Math.log2(p);
  }
  return bits;
}
