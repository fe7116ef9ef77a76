import * as z from 'zod';
import { CODE_LANGUAGES } from './code-languages.js';

export * from './code-languages.js';

/**
 * The code interpreter's shapes (docs/code-interpreter.md). A `code` step runs one cell in a
 * context: a kernel inside the sandbox (Python, JavaScript or bash) that keeps its state between
 * the cells sent to it. The step's output carries the cell's rich results and its exception;
 * its stdout and stderr stream as the step's output lines, as a command's do.
 */
export const CodeLanguageSchema = z.enum(CODE_LANGUAGES, {
  error: `language must be one of ${CODE_LANGUAGES.join(', ')}`,
});

/** A context's name: short and printable; each names one kernel of the sandbox. */
export const CodeContextIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9._-]{1,64}$/, 'a context is 1 to 64 letters, digits, ".", "_" or "-"');

/**
 * One representation set of a value the cell produced (Jupyter's mimebundle, by its short names):
 * png as base64, json as the value itself. `isMainResult`: the value of the cell's last expression.
 */
export const CodeResultSchema = z.object({
  text: z.string().optional(),
  html: z.string().optional(),
  markdown: z.string().optional(),
  png: z.string().optional(),
  svg: z.string().optional(),
  json: z.unknown().optional(),
  isMainResult: z.boolean(),
});
export type CodeResult = z.infer<typeof CodeResultSchema>;

/** An exception the cell raised, as the language prints it. */
export const CodeErrorSchema = z.object({
  name: z.string(),
  value: z.string(),
  traceback: z.string(),
});
export type CodeError = z.infer<typeof CodeErrorSchema>;

/** The structured output of a `code` step. */
export const CodeOutputSchema = z.object({
  kind: z.literal('code'),
  language: CodeLanguageSchema,
  context: z.string(),
  results: z.array(CodeResultSchema),
  error: CodeErrorSchema.nullable(),
  /**
   * The context's earlier state is gone: its kernel had died (or was killed because an interrupt
   * did not stop the cell) and this cell ran in a fresh one, or this cell's kernel died.
   */
  stateLost: z.boolean(),
  /**
   * This cell's agent started the context's kernel for it (first use, or a fresh kernel after a
   * death, or the first cell an agent that replaced another ran there). Absent: false. The SDK
   * turns a start for a context the sandbox had before into `stateLost` (code-context-record.ts).
   */
  kernelStarted: z.boolean().optional(),
  /** Results left out because the cell's results passed Limits.codeResultsMaxBytes. */
  droppedResults: z.number().int().nonnegative().optional(),
});
export type CodeOutput = z.infer<typeof CodeOutputSchema>;
