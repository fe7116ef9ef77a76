import type { ExecOptions, ExecResult, Sandbox } from '@sandstream/client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ExecBody } from './schemas.js';
import { SseStream, wantsEventStream } from './sse.js';

/** The SDK's command argument for a request body: a shell string, or an argv. */
export function commandOf(body: {
  command: string | string[];
  args?: string[] | undefined;
}): string | string[] {
  if (Array.isArray(body.command)) return [...body.command, ...(body.args ?? [])];
  return body.args === undefined ? body.command : [body.command, ...body.args];
}

/**
 * Runs a command for an HTTP request: one JSON ExecResult, or (Accept: text/event-stream) a
 * `started` event with its id (for DELETE …/exec/{execId}), its output lines as `stdout` /
 * `stderr` / `gap` events, then the `result`. The request owns the command: a client that goes
 * away before the end cancels it, as an aborted SDK call does.
 */
export async function execForRequest(
  sandbox: Sandbox,
  body: ExecBody,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<ExecResult | FastifyReply> {
  const options: ExecOptions = {
    ...(body.shell !== undefined ? { shell: body.shell } : {}),
    ...(body.cwd !== undefined ? { cwd: body.cwd } : {}),
    ...(body.env !== undefined ? { env: body.env } : {}),
    ...(body.timeoutSeconds !== undefined ? { timeoutSeconds: body.timeoutSeconds } : {}),
    ...(body.maxOutputBytes !== undefined ? { maxOutputBytes: body.maxOutputBytes } : {}),
    ...(body.stdin !== undefined ? { stdin: body.stdin } : {}),
  };
  if (!wantsEventStream(request)) {
    const gone = new AbortController();
    let finished = false;
    reply.raw.once('close', () => {
      if (!finished) gone.abort();
    });
    try {
      return await sandbox.exec(commandOf(body), { ...options, signal: gone.signal });
    } finally {
      finished = true;
    }
  }
  const sse = new SseStream(request, reply);
  try {
    const execution = sandbox.exec(commandOf(body), {
      ...options,
      signal: sse.signal,
      onStart: (commandId) => void sse.send('started', { commandId }),
    });
    for await (const item of execution) await sse.send(item.stream, item);
    await sse.send('result', await execution);
    sse.end();
  } catch (err) {
    await sse.fail(err);
  }
  return reply;
}
