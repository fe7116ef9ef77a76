import * as z from 'zod';
import { CodeOutputSchema } from './code.js';
import { SchemaVersionSchema } from './schema-version.js';
import { STEP_ERROR_CODES } from './step-error-codes.js';

export * from './error-result.js';

/** Machine-readable reason next to the human `errorMessage`. */
export const StepErrorCodeSchema = z.enum(STEP_ERROR_CODES);
export type StepErrorCode = z.infer<typeof StepErrorCodeSchema>;

export const FileEntrySchema = z.object({
  /** Relative to the listed directory, with `/` separators. */
  path: z.string(),
  type: z.enum(['file', 'directory', 'symlink', 'other']),
  sizeBytes: z.number().int().nonnegative(),
});
export type FileEntry = z.infer<typeof FileEntrySchema>;

export const GrepMatchSchema = z.object({
  /** Relative to the searched directory (or the file's own path when a file was searched). */
  path: z.string(),
  /** 1-based line number. */
  line: z.number().int().positive(),
  /** 1-based column of the first match on the line. */
  column: z.number().int().positive(),
  text: z.string(),
});
export type GrepMatch = z.infer<typeof GrepMatchSchema>;

/** Structured output of the file, list and grep steps (run steps stream their output as events). */
export const StepOutputSchema = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('readFile'),
    path: z.string(),
    content: z.string(),
    sizeBytes: z.number().int(),
  }),
  z.object({ kind: z.literal('writeFile'), path: z.string(), bytesWritten: z.number().int() }),
  z.object({
    kind: z.literal('listFiles'),
    path: z.string(),
    entries: z.array(FileEntrySchema),
    truncated: z.boolean(),
  }),
  z.object({ kind: z.literal('upload'), path: z.string(), bytes: z.number().int(), files: z.number().int() }),
  z.object({
    kind: z.literal('download'),
    path: z.string(),
    bytes: z.number().int(),
    files: z.number().int(),
  }),
  z.object({
    kind: z.literal('stats'),
    /** CPU time used by the agent's cgroup since it started, or null where it cannot be read. */
    cpuSeconds: z.number().nonnegative().nullable(),
    /** Memory charged to the cgroup now (memory.current), or null. */
    memoryBytes: z.number().int().nonnegative().nullable(),
    /** The cgroup's memory limit, or null when unlimited or unknown. */
    memoryLimitBytes: z.number().int().nonnegative().nullable(),
    /** Sizes of the workspace's regular files. */
    workspaceBytes: z.number().int().nonnegative(),
    workspaceFiles: z.number().int().nonnegative(),
    /** The walk stopped at its entry limit: the workspace holds more than counted. */
    workspaceTruncated: z.boolean(),
  }),
  z.object({
    kind: z.literal('grep'),
    matches: z.array(GrepMatchSchema),
    truncated: z.boolean(),
    engine: z.enum(['ripgrep', 'builtin']),
  }),
  CodeOutputSchema,
]);
export type StepOutput = z.infer<typeof StepOutputSchema>;

/** One per Step, pushed to `sandbox:{jobId}:results`. Field names as seeds/000 prints them. */
export const StepResultSchema = z.object({
  schemaVersion: SchemaVersionSchema,
  /** Null only when a malformed message carried no readable stepId. */
  stepId: z.string().nullable(),
  exitCode: z.number().int().nullable(),
  timedOut: z.boolean(),
  durationSeconds: z.number().nonnegative(),
  errorMessage: z.string().nullable(),
  errorCode: StepErrorCodeSchema.optional(),
  cancelled: z.boolean().optional(),
  /** Output lines the agent could not ship because Redis fell behind (see the events' seq gaps). */
  droppedLines: z.number().int().nonnegative().optional(),
  /**
   * Output lines the step produced, shipped or dropped: the number of line seqs it used (its
   * `completed` event's seq minus one). With droppedLines it gives the step's event volume
   * without reading the stream. Optional: results from older agents lack it.
   */
  outputLines: z.number().int().nonnegative().optional(),
  output: StepOutputSchema.optional(),
});
export type StepResult = z.infer<typeof StepResultSchema>;
