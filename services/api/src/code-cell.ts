import type { Execution, RunCodeOptions, Sandbox } from '@sandstream/client';
import { CodeContextIdSchema, CodeLanguageSchema, Limits, strictObject } from '@sandstream/wire';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { whileClientStays } from './client-departure.js';
import { SseStream, wantsEventStream } from './sse.js';

/** POST /v1/sandboxes/{id}/code: one cell for the code interpreter (docs/code-interpreter.md). */
export const CodeBody = strictObject(
  {
    code: z.string().max(Limits.codeMaxBytes, `code is at most ${Limits.codeMaxBytes} characters`),
    language: CodeLanguageSchema.optional(),
    /** A context's id (absent: the language's default context). */
    context: CodeContextIdSchema.optional(),
    /** Where the context's kernel starts, when this cell starts it. */
    cwd: z.string().min(1).max(4096).optional(),
    timeoutSeconds: z
      .number()
      .positive('timeoutSeconds must be positive')
      .max(Limits.runMaxTimeoutSeconds, `timeoutSeconds is at most ${Limits.runMaxTimeoutSeconds}`)
      .optional(),
  },
  { timeout: 'did you mean "timeoutSeconds"? timeouts are in seconds', lang: 'did you mean "language"?' },
);
export type CodeBody = z.output<typeof CodeBody>;

/**
 * Runs a cell for an HTTP request: the Execution as JSON, or (Accept: text/event-stream) a
 * `started` event with its command id (for DELETE …/exec/{execId}), its output lines as
 * `stdout` / `stderr` events, a `result` event for each rich result as the cell produces it
 * (each once, in order: the SDK's onResult), then the `execution`. A
 * client that goes away interrupts the cell (the context keeps its state).
 */
export async function runCodeForRequest(
  sandbox: Sandbox,
  body: CodeBody,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<Execution | FastifyReply> {
  const options: RunCodeOptions = {
    ...(body.language !== undefined ? { language: body.language } : {}),
    ...(body.context !== undefined
      ? {
          context:
            body.cwd !== undefined
              ? { id: body.context, language: body.language ?? 'python', cwd: body.cwd }
              : body.context,
        }
      : {}),
    ...(body.timeoutSeconds !== undefined ? { timeoutSeconds: body.timeoutSeconds } : {}),
  };
  if (!wantsEventStream(request)) {
    return whileClientStays(reply, (signal) => sandbox.runCode(body.code, { ...options, signal }));
  }
  const sse = new SseStream(request, reply);
  try {
    const execution = await sandbox.runCode(body.code, {
      ...options,
      signal: sse.signal,
      onStart: (commandId) => void sse.send('started', { commandId }),
      onStdout: (line) => void sse.send('stdout', { line }),
      onStderr: (line) => void sse.send('stderr', { line }),
      onResult: (result) => void sse.send('result', result),
    });
    await sse.send('execution', execution);
    sse.end();
  } catch (err) {
    await sse.fail(err);
  }
  return reply;
}
