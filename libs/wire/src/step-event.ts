import * as z from 'zod';
import { EVENT_FIELD } from './event-field.js';
import { SchemaVersionSchema } from './schema-version.js';
import { StepResultSchema } from './step-result.js';

export * from './event-field.js';

export const StepEventKindSchema = z.enum(['started', 'stdout', 'stderr', 'result', 'completed']);
export type StepEventKind = z.infer<typeof StepEventKindSchema>;

/**
 * One piece of a code cell's result, sent as the cell produces it (a `result` event): the
 * result's JSON (CodeResultSchema), cut into pieces of at most Limits.eventLineMaxBytes as long
 * lines are, `index` its place in the cell's `results`. The StepResult's `results` stay the
 * record: a result whose pieces a follower did not all see (dropped when the agent's buffer was
 * full, trimmed from the stream) is taken from there at the cell's end.
 */
export const CodeResultPieceSchema = z.object({
  index: z.number().int().nonnegative(),
  piece: z.number().int().nonnegative(),
  pieces: z.number().int().positive(),
  json: z.string(),
});
export type CodeResultPiece = z.infer<typeof CodeResultPieceSchema>;

/**
 * One entry of `sandbox:{jobId}:events`. `seq` starts at 0 with `started` and grows by one for
 * every output line the step produced, including lines the agent had to drop and lines the
 * stream's MAXLEN trimmed away, so a follower sees a gap wherever it missed something. A
 * `result` event is not a line: it takes no seq of its own and carries the last line's, so
 * followers that only count lines see no gap for it.
 */
export const StepEventSchema = z.object({
  schemaVersion: SchemaVersionSchema,
  stepId: z.string(),
  kind: StepEventKindSchema,
  seq: z.number().int().nonnegative(),
  /** The line without its newline (stdout/stderr only). */
  line: z.string().optional(),
  /** result only. */
  codeResult: CodeResultPieceSchema.optional(),
  /** ISO 8601 with milliseconds and offset, as seeds/000 prints it. */
  timestamp: z.string(),
  /** completed only. */
  exitCode: z.number().int().nullable().optional(),
  /** completed only: lines counted but not shipped. */
  droppedLines: z.number().int().nonnegative().optional(),
  /**
   * completed only, for steps marked `parallel` whose result has no structured output (a live
   * sandbox's commands): the StepResult itself, which is also pushed to `:results`. The client
   * following the command has its answer in the event it waits for, one round trip sooner.
   */
  result: StepResultSchema.optional(),
});
export type StepEvent = z.infer<typeof StepEventSchema>;

/**
 * Every event of one stream entry (in seq order), from its flat field list; empty for entries
 * this reader does not understand. An event that does not parse is left out (with the others kept).
 */
export function decodeEventEntry(fields: readonly string[]): StepEvent[] {
  const events: StepEvent[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] !== EVENT_FIELD) continue;
    try {
      const parsed = StepEventSchema.safeParse(JSON.parse(fields[i + 1] as string));
      if (parsed.success) events.push(parsed.data);
    } catch {
      // not JSON: not ours
    }
  }
  return events;
}

/**
 * The first event of one stream entry; null for entries this reader does not understand. Enough
 * for entries that hold one event (started, completed); output may be packed: decodeEventEntry.
 */
export function decodeEventFields(fields: readonly string[]): StepEvent | null {
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] !== EVENT_FIELD) continue;
    try {
      const parsed = StepEventSchema.safeParse(JSON.parse(fields[i + 1] as string));
      return parsed.success ? parsed.data : null;
    } catch {
      return null;
    }
  }
  return null;
}
