/**
 * Snapshot bytes whose every byte the caller checked against the SHA-256 recorded when they were
 * written, before a restore finishes with them: the object store's read (SnapshotStore.open, whole
 * before the first byte is handed out), the capture cache's (hashed whole first), a capture's
 * spool followed as it grows (hashed as read, the stream fails at its end on a mismatch, and the
 * decoder reads to the end before it returns). Such bytes are exactly what the encoder wrote, so
 * the decoder skips its own SHA-256 of the decoded content (the end marker's): a third check of
 * the same bytes, beside each gzip member's CRC-32, that cost a restore's main thread ~0.15 s of
 * CPU per 200 MB (docs/benchmarks.md). Every other check stays: the end marker and its entry
 * count, truncation, headers, trailing bytes.
 *
 * A mark on the stream object, not a flag passed along: it reaches the decoder through every
 * backend's restore unchanged, and anything that wraps or re-reads the bytes drops it, so those
 * are checked in full.
 */
const checked = new WeakSet<object>();

/** Marks `bytes` as checked whole (see above); returns them. */
export function checkedWhole<T extends object>(bytes: T): T {
  checked.add(bytes);
  return bytes;
}

/** Whether `bytes` were marked by checkedWhole. */
export function wasCheckedWhole(bytes: object): boolean {
  return checked.has(bytes);
}
