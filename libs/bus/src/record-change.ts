import { JobIdSchema } from '@sandstream/wire';
import { z } from 'zod';

/**
 * A change to a record that is not a state transition but moves what a list shows (a live
 * sandbox became ready, is pausing or closing; a finished record was removed), as an entry of
 * `events:lifecycle` beside the JobEvents. Its own field (RECORD_CHANGE_FIELD, not `job`), so
 * the stream's other readers (the NATS relay, log-archive discovery) skip it as they skip what
 * they do not understand, and JobEvent's types and NATS subjects stay what they were. The API's
 * list event stream (services/api list-changes.ts) reads the record again for each one.
 */
export const RecordChangeSchema = z.object({
  jobId: JobIdSchema,
  /** Whose record; a `removed` change without it is shown to admin keys only. */
  tenant: z.string().optional(),
  what: z.enum(['ready', 'pausing', 'closing', 'removed']),
  at: z.number().int(),
});
export type RecordChange = z.infer<typeof RecordChangeSchema>;

/** The stream field holding a RecordChange's JSON on `events:lifecycle`. */
export const RECORD_CHANGE_FIELD = 'changed';

/** The RecordChange of a stream entry's fields, or null when it carries none (or a bad one). */
export function decodeRecordChangeFields(fields: readonly string[]): RecordChange | null {
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] !== RECORD_CHANGE_FIELD) continue;
    try {
      const parsed = RecordChangeSchema.safeParse(JSON.parse(fields[i + 1] as string));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }
  return null;
}
