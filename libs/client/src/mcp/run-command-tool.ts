import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { z } from 'zod';
import type { ExecResult } from '../command-output.js';
import type { ExecOptions } from '../sandbox-options.js';
import { HeadTailOutput } from './head-tail-output.js';
import type { SandboxHost } from './sandbox-host.js';
import type { RunCommandInput } from './tool-schemas.js';

/** What a model is shown of each stream: its start and its end, 16 KiB each (the middle is counted). */
const HEAD_BYTES = 16 * 1024;
const TAIL_BYTES = 16 * 1024;
/** Progress while a command runs: at most this often on output, and at least this often without. */
const PROGRESS_MIN_MS = 250;
const PROGRESS_HEARTBEAT_MS = 1000;

type Args = z.output<typeof RunCommandInput>;
type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * run_command: the command line through /bin/sh -c, its output bounded (head and tail), progress
 * notifications while it runs (when the client asked for them with a progress token), and the
 * request's abort signal (an MCP cancellation, or the client gone) handed to the SDK, which
 * kills the command's whole process tree.
 */
export async function runCommandTool(host: SandboxHost, args: Args, extra: Extra): Promise<CallToolResult> {
  const sandbox = await host.sandbox(args.sandboxId);
  const options: ExecOptions = {
    ...(args.cwd !== undefined ? { cwd: args.cwd } : {}),
    ...(args.env !== undefined ? { env: args.env } : {}),
    ...(args.timeoutSeconds !== undefined ? { timeoutSeconds: args.timeoutSeconds } : {}),
  };
  if (args.background) {
    const started = await sandbox.processes.start(args.command, { ...options, shell: true });
    return {
      content: [
        {
          type: 'text',
          text: `started in the background as process ${started.id}; it runs until it exits or the sandbox closes`,
        },
      ],
      structuredContent: { commandId: started.id, background: true },
    };
  }
  const stdout = new HeadTailOutput(HEAD_BYTES, TAIL_BYTES);
  const stderr = new HeadTailOutput(HEAD_BYTES, TAIL_BYTES);
  const progress = progressReporter(extra);
  try {
    const result = await sandbox.exec(args.command, {
      ...options,
      // The SDK keeps nothing itself: the head and tail above are what is kept.
      maxOutputBytes: 1,
      signal: extra.signal,
      onStdout: (line) => {
        stdout.add(line);
        progress?.line(line);
      },
      onStderr: (line) => {
        stderr.add(line);
        progress?.line(line);
      },
    });
    return commandResult(result, stdout, stderr, args.timeoutSeconds);
  } finally {
    progress?.stop();
  }
}

function commandResult(
  result: ExecResult,
  stdout: HeadTailOutput,
  stderr: HeadTailOutput,
  timeoutSeconds: number | undefined,
): CallToolResult {
  const structured = {
    commandId: result.commandId,
    exitCode: result.exitCode,
    stdout: stdout.text(),
    stderr: stderr.text(),
    timedOut: result.timedOut,
    cancelled: result.cancelled,
    durationMs: result.durationMs,
    ...(stdout.omittedBytes > 0 ? { stdoutOmittedBytes: stdout.omittedBytes } : {}),
    ...(stderr.omittedBytes > 0 ? { stderrOmittedBytes: stderr.omittedBytes } : {}),
  };
  const failure = result.timedOut
    ? `the command timed out after ${timeoutSeconds ?? 'its default'} s and was killed (run it in the background, or give a longer timeoutSeconds)`
    : result.cancelled
      ? 'the command was cancelled and killed'
      : result.exitCode === null
        ? `the command could not run: ${result.errorMessage ?? 'no exit code'}`
        : undefined;
  const head = failure ?? `exit code ${result.exitCode}`;
  const text = [
    `${head} (${result.durationMs} ms)`,
    ...(structured.stdout ? ['stdout:', structured.stdout] : []),
    ...(structured.stderr ? ['stderr:', structured.stderr] : []),
  ].join('\n');
  return {
    content: [{ type: 'text', text }],
    structuredContent: structured,
    ...(failure ? { isError: true } : {}),
  };
}

/**
 * notifications/progress for the request, when it carries a progress token: on output (the
 * latest line, at most every PROGRESS_MIN_MS) and as a heartbeat (elapsed time and lines so far).
 * `progress` is the seconds elapsed, which only grows, as the protocol requires.
 */
function progressReporter(extra: Extra) {
  const token = extra._meta?.progressToken;
  if (token === undefined) return undefined;
  const started = Date.now();
  let lines = 0;
  let lastSent = 0;
  let lastProgress = -1;
  const send = (message: string) => {
    const now = Date.now();
    const progress = Math.max((now - started) / 1000, lastProgress + 0.001);
    lastProgress = progress;
    lastSent = now;
    extra
      .sendNotification({
        method: 'notifications/progress',
        params: { progressToken: token, progress, message },
      })
      .catch(() => {});
  };
  const heartbeat = setInterval(() => {
    if (Date.now() - lastSent >= PROGRESS_HEARTBEAT_MS)
      send(`running for ${Math.round((Date.now() - started) / 1000)} s, ${lines} lines of output so far`);
  }, PROGRESS_HEARTBEAT_MS);
  heartbeat.unref();
  return {
    line(text: string) {
      lines++;
      if (Date.now() - lastSent >= PROGRESS_MIN_MS) send(text.length > 200 ? `${text.slice(0, 200)}…` : text);
    },
    stop() {
      clearInterval(heartbeat);
    },
  };
}
