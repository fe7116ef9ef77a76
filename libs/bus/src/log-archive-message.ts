import { z } from 'zod';

/**
 * The JetStream log archive's message format (docs/log-archive.md). Bodies are JSON; headers
 * carry what a reader or a resuming archiver needs without parsing the body.
 */
export const ArchiveHeaders = {
  msgId: 'Nats-Msg-Id',
  jobId: 'Sandstream-Job-Id',
  /** The last Redis stream entry id this message accounts for (archived or lost). */
  lastEntry: 'Sandstream-Last-Entry',
  /** How many of the job stream's entries, from its first, this message and those before account for. */
  entries: 'Sandstream-Entries',
  /** `1` on the final message of a job. */
  complete: 'Sandstream-Complete',
  /** The highest id deleted from the middle of the stream (XDEL) already recorded as a gap. */
  deletedSeen: 'Sandstream-Deleted-Seen',
  /** On a gap marker: how many entries were lost, or `unknown`. */
  gap: 'Sandstream-Gap',
  /**
   * The job record's createdAt: which job of that id the message belongs to. Ids may be reused
   * once a job was reaped, and one subject serves an id.
   */
  incarnation: 'Sandstream-Job-Created',
} as const;

/** One Redis stream entry exactly as XREAD returned it: id, then field, value, field, value… */
export const ArchivedEntrySchema = z.tuple([z.string(), z.array(z.string())]);
export type ArchivedEntry = z.infer<typeof ArchivedEntrySchema>;

export const ArchiveGapSchema = z.object({
  /** The last entry archived before the loss ('0-0': from the start). */
  after: z.string(),
  /** The first entry still there after it, when known. */
  before: z.string().nullable(),
  /** Entries lost, when known. */
  lost: z.number().int().nullable(),
  reason: z.string(),
});
export type ArchiveGap = z.infer<typeof ArchiveGapSchema>;

export const ArchiveMessageSchema = z.object({
  entries: z.array(ArchivedEntrySchema),
  complete: z.literal(true).optional(),
  gap: ArchiveGapSchema.optional(),
});
export type ArchiveMessage = z.infer<typeof ArchiveMessageSchema>;

/**
 * Orders Redis stream ids (`<ms>-<seq>`, each a decimal without leading zeros) numerically: the
 * longer number is the larger, equal lengths compare as strings. Exact for 64-bit parts, where
 * Number would round, and cheap enough for a million entries, where BigInt is not.
 */
export function compareEntryIds(a: string, b: string): number {
  const ad = a.indexOf('-');
  const bd = b.indexOf('-');
  const [am, as] = ad < 0 ? [a, '0'] : [a.slice(0, ad), a.slice(ad + 1)];
  const [bm, bs] = bd < 0 ? [b, '0'] : [b.slice(0, bd), b.slice(bd + 1)];
  return comparePart(am, bm) || comparePart(as, bs);
}

function comparePart(a: string, b: string): number {
  if (a.length !== b.length) return a.length < b.length ? -1 : 1;
  return a === b ? 0 : a < b ? -1 : 1;
}

/** The smallest id after `id` (MINID for "everything up to and including id"). */
export function nextEntryId(id: string): string {
  const [ms, seq] = splitId(id);
  return `${ms}-${seq + 1n}`;
}

function splitId(id: string): [bigint, bigint] {
  const dash = id.indexOf('-');
  // BigInt: both halves are 64-bit in Redis, past Number's exact range.
  return dash < 0 ? [BigInt(id), 0n] : [BigInt(id.slice(0, dash)), BigInt(id.slice(dash + 1))];
}
