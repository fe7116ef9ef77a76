import type { CommandExecution, ExecOptions, ExecResult, Sandbox } from '@sandstream/client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { whileClientStays } from './client-departure.js';
import { HttpProblem } from './problem.js';
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

/** The command as the SDK runs it: in a named shell session, or on its own. */
function startOf(sandbox: Sandbox, body: ExecBody, options: ExecOptions): CommandExecution {
  if (body.session === undefined) return sandbox.exec(commandOf(body), options);
  if (typeof body.command !== 'string' || body.args !== undefined) {
    throw new HttpProblem(
      400,
      'invalid-request',
      'command: with session, command is one shell command line',
      [{ field: 'body.command', rule: 'with session, a string (a shell command line) and no args' }],
    );
  }
  const { timeoutSeconds, maxOutputBytes, signal, onStdout, onStderr, onStart } = options;
  const unsupported = (['cwd', 'env', 'stdin', 'stdinEncoding', 'shell', 'openStdin'] as const).filter(
    (k) => body[k] !== undefined,
  );
  if (unsupported.length > 0) {
    throw new HttpProblem(400, 'invalid-request', `${unsupported.join(', ')}: not with session`, [
      ...unsupported.map((k) => ({ field: `body.${k}`, rule: 'a shell session keeps its own' })),
    ]);
  }
  return sandbox.shell(body.session).run(body.command, {
    ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
    ...(maxOutputBytes !== undefined ? { maxOutputBytes } : {}),
    ...(signal ? { signal } : {}),
    ...(onStdout ? { onStdout } : {}),
    ...(onStderr ? { onStderr } : {}),
    ...(onStart ? { onStart } : {}),
  });
}

/**
 * Runs a command for an HTTP request: one JSON ExecResult, or (Accept: text/event-stream) a
 * `started` event with its id (for DELETE …/exec/{execId}), its output lines as `stdout` /
 * `stderr` / `gap` events, then the `result`. The request owns the command: a client that goes
 * away before the end aborts the SDK call, which the SDK (Sandbox.execution) turns into a cancel.
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
    ...(body.openStdin !== undefined ? { openStdin: body.openStdin } : {}),
    ...(body.maxOutputBytes !== undefined ? { maxOutputBytes: body.maxOutputBytes } : {}),
    ...(body.stdin !== undefined
      ? {
          stdin:
            body.stdinEncoding === 'base64' ? new Uint8Array(Buffer.from(body.stdin, 'base64')) : body.stdin,
        }
      : {}),
  };
  if (!wantsEventStream(request)) {
    return whileClientStays(reply, (signal) => startOf(sandbox, body, { ...options, signal }));
  }
  const sse = new SseStream(request, reply);
  try {
    const execution = startOf(sandbox, body, {
      ...options,
      signal: sse.signal,
      onStart: (commandId) => void sse.send('started', { commandId }),
    });
    await sendExecution(sse, execution);
  } catch (err) {
    await sse.fail(err);
  }
  return reply;
}

/**
 * A command's event stream, for exec and a process's output alike: each output item (the SDK's
 * ExecItem, which the HTTP transport reads back with execItemOf) as an event named by its
 * stream, then the `result`.
 */
export async function sendExecution(sse: SseStream, execution: CommandExecution): Promise<void> {
  for await (const item of execution) await sse.send(item.stream, item);
  const result = await execution;
  // A follow its client stopped (went away) ends quietly: there is no one to tell the rest.
  if (result.stillRunning !== true) await sse.send('result', result);
  sse.end();
}
