import {
  CodeContextIdSchema,
  CodeErrorSchema,
  CodeLanguageSchema,
  type CodeOutput,
  type CodeResult,
  CodeResultSchema,
  Limits,
  type StepResult,
  strictObject,
} from '@sandstream/wire';
import { z } from 'zod';
import type { ExecResult } from './command-output.js';
import { SandboxCodeError } from './sandbox-errors.js';

// The code interpreter as the SDK shows it (docs/code-interpreter.md): runCode's options and
// answer, and createCodeContext's handle. Zod schemas, so the API's OpenAPI document and its
// validation come from the same place.

const fn = <T>(what: string) =>
  z.custom<T>((v) => typeof v === 'function', { message: `${what} must be a function` });

/** A context of its own (createCodeContext): its name, language and working directory. */
export const CodeContextSchema = z
  .object({
    id: CodeContextIdSchema,
    language: CodeLanguageSchema,
    /** Where its kernel started (absent: the sandbox's workspace). */
    cwd: z.string().optional(),
  })
  .meta({ id: 'CodeContext' });
export type CodeContext = z.infer<typeof CodeContextSchema>;

export const CreateCodeContextOptionsSchema = strictObject({
  language: CodeLanguageSchema.optional(),
  /** The kernel's working directory, relative to the workspace or absolute. */
  cwd: z.string().min(1).max(4096).optional(),
});
export type CreateCodeContextOptions = z.input<typeof CreateCodeContextOptionsSchema>;

export const RunCodeOptionsSchema = strictObject(
  {
    /** Default python, or the context's language. */
    language: CodeLanguageSchema.optional(),
    /** A context from createCodeContext (or its id); absent: the language's default context. */
    context: z.union([CodeContextIdSchema, CodeContextSchema]).optional(),
    /** The cell is interrupted then (KeyboardInterrupt in Python); the context keeps its state. */
    timeoutSeconds: z
      .number()
      .positive('timeoutSeconds must be positive')
      .max(Limits.runMaxTimeoutSeconds, `timeoutSeconds is at most ${Limits.runMaxTimeoutSeconds}`)
      .optional(),
    onStdout: fn<(line: string) => void>('onStdout').optional(),
    onStderr: fn<(line: string) => void>('onStderr').optional(),
    /**
     * Told each result (display(), a plot, the main result) as the cell produces it: each once,
     * in the order of `results`. One the agent could not stream (bigger than its output buffer's
     * room) comes at the cell's end, and so do those after it.
     */
    onResult: fn<(result: CodeResult) => void>('onResult').optional(),
    /** Told the cell's command id once the sandbox took it. */
    onStart: fn<(commandId: string) => void>('onStart').optional(),
    /** Aborting interrupts the cell (the context keeps its state); runCode throws CommandCancelledError. */
    signal: z.instanceof(AbortSignal, { message: 'signal must be an AbortSignal' }).optional(),
  },
  {
    timeout: 'did you mean "timeoutSeconds"? timeouts are in seconds',
    timeoutMs: 'did you mean "timeoutSeconds"? timeouts are in seconds',
    cwd: 'a context has its working directory: createCodeContext({ cwd })',
  },
);
export type RunCodeOptions = z.input<typeof RunCodeOptionsSchema>;

/** What runCode answers. */
export const ExecutionSchema = z
  .object({
    commandId: z.string(),
    language: CodeLanguageSchema,
    context: z.string(),
    results: z.array(CodeResultSchema),
    /** The output lines, each ending in a newline. */
    stdout: z.string(),
    stderr: z.string(),
    /** The exception the cell raised (a timeout: the interrupt's, with `timedOut`). */
    error: CodeErrorSchema.optional(),
    /** The context's earlier state is gone (its kernel had died, or was killed by this cell). */
    stateLost: z.boolean(),
    timedOut: z.boolean(),
    /** Interrupted by a cancel (an abort of this call throws CommandCancelledError instead). */
    cancelled: z.boolean(),
    /** Results left out over the size limit. */
    droppedResults: z.number().int().optional(),
    durationMs: z.number(),
  })
  .meta({ id: 'Execution' });
export type Execution = z.infer<typeof ExecutionSchema>;

/** The main result's text, as a REPL prints it (the CLI's answer). */
export function mainResultText(execution: Execution): string | undefined {
  return execution.results.find((r) => r.isMainResult)?.text;
}

/**
 * A code command's answer from its ExecResult and StepResult: a refusal the agent made before
 * any kernel ran (no python3 in the image, too many contexts, a context of another language)
 * throws SandboxCodeError; an interrupted cell is an Execution with `timedOut` or `cancelled`.
 */
export function executionOf(exec: ExecResult, result: StepResult): Execution {
  const output: CodeOutput | undefined = result.output?.kind === 'code' ? result.output : undefined;
  if (!output) {
    throw new SandboxCodeError(
      result.errorMessage ?? 'the code interpreter gave no answer',
      result.errorCode,
    );
  }
  const timeout = exec.timedOut ? exec.errorMessage : null;
  return {
    commandId: exec.commandId,
    language: output.language,
    context: output.context,
    results: output.results,
    stdout: exec.stdout,
    stderr: exec.stderr,
    ...(output.error
      ? {
          error: timeout ? { ...output.error, name: 'TimeoutError', value: timeout } : output.error,
        }
      : timeout
        ? { error: { name: 'TimeoutError', value: timeout, traceback: '' } }
        : {}),
    stateLost: output.stateLost,
    timedOut: exec.timedOut,
    cancelled: exec.cancelled,
    ...(output.droppedResults !== undefined ? { droppedResults: output.droppedResults } : {}),
    durationMs: exec.durationMs,
  };
}
