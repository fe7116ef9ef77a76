import { z } from 'zod';

/**
 * One file system entry of a snapshot. Paths are relative and `/`-separated, under a part name
 * (`work/…` a sandbox's work tree, `root/…` a Docker container's own layer), never absolute and
 * never with `..`. A `whiteout` says the path is absent (removed from what the image has).
 */
export const SnapshotEntrySchema = z.strictObject({
  path: z
    .string()
    .min(1)
    .max(4096)
    .refine((p) => !p.startsWith('/') && !p.split('/').some((s) => s === '..' || s === '.' || s === ''), {
      message: 'path must be relative, without empty, "." or ".." segments',
    }),
  type: z.enum(['file', 'dir', 'symlink', 'whiteout']),
  mode: z.number().int().min(0).max(0o7777),
  uid: z.number().int().min(0),
  gid: z.number().int().min(0),
  mtimeMs: z.number(),
  /** Bytes of content that follow the header (files only). */
  size: z.number().int().min(0).default(0),
  /** A symlink's target, as written. */
  target: z.string().max(4096).optional(),
});
export type SnapshotEntry = z.output<typeof SnapshotEntrySchema>;

/** The last frame: how many entries came before it and the SHA-256 of every byte before it. */
export const SnapshotTrailerSchema = z.strictObject({
  type: z.literal('end'),
  entries: z.number().int().min(0),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
export type SnapshotTrailer = z.infer<typeof SnapshotTrailerSchema>;

/** An entry as a capture yields it: a file's content is read only when the encoder gets to it. */
export interface CapturedEntry {
  entry: SnapshotEntry;
  content?: () => AsyncIterable<Buffer>;
  /** A small file's content read whole, so it can be read ahead of its turn (prefetchContent). */
  readWhole?: () => Promise<Buffer>;
}

/** An entry as a restore reads it: a file's content must be consumed before the next entry. */
export interface RestoredEntry {
  entry: SnapshotEntry;
  content: AsyncIterable<Buffer>;
}

/** Why a snapshot stream cannot be restored: the message names what is wrong. */
export class SnapshotCorruptError extends Error {
  override readonly name = 'SnapshotCorruptError';
}
