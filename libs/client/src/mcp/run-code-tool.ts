import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { mainResultText } from '../code-execution.js';
import { HeadTailOutput } from './head-tail-output.js';
import type { SandboxHost } from './sandbox-host.js';
import type { RunCodeInput } from './tool-schemas.js';

/** What a model is shown of each stream, as run_command shows it. */
const HEAD_BYTES = 16 * 1024;
const TAIL_BYTES = 16 * 1024;

type Args = z.output<typeof RunCodeInput>;
type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** run_code's structured answer: the execution without the images (those come as image content). */
export const RunCodeOutput = {
  context: z.string(),
  stdout: z.string(),
  stderr: z.string(),
  results: z.array(
    z.object({
      text: z.string().optional(),
      html: z.string().optional(),
      markdown: z.string().optional(),
      json: z.unknown().optional(),
      isMainResult: z.boolean(),
      /** The result is a picture: it follows as image content. */
      image: z.boolean().optional(),
    }),
  ),
  error: z.object({ name: z.string(), value: z.string(), traceback: z.string() }).optional(),
  stateLost: z.boolean(),
  timedOut: z.boolean(),
};

/**
 * run_code: one cell in the sandbox's code interpreter (the context's state kept between calls),
 * its output bounded as run_command's, plots as image content the model can look at, and the
 * request's abort signal interrupting the cell.
 */
export async function runCodeTool(host: SandboxHost, args: Args, extra: Extra): Promise<CallToolResult> {
  const sandbox = await host.sandbox(args.sandboxId);
  const stdout = new HeadTailOutput(HEAD_BYTES, TAIL_BYTES);
  const stderr = new HeadTailOutput(HEAD_BYTES, TAIL_BYTES);
  const execution = await sandbox.runCode(args.code, {
    ...(args.language !== undefined ? { language: args.language } : {}),
    ...(args.context !== undefined ? { context: args.context } : {}),
    ...(args.timeoutSeconds !== undefined ? { timeoutSeconds: args.timeoutSeconds } : {}),
    signal: extra.signal,
    onStdout: (line) => stdout.add(line),
    onStderr: (line) => stderr.add(line),
  });
  const out = stdout.text();
  const err = stderr.text();
  const structured = {
    context: execution.context,
    stdout: out,
    stderr: err,
    results: execution.results.map(({ png: _png, svg: _svg, ...rest }) => ({
      ...rest,
      ...(_png !== undefined || _svg !== undefined ? { image: true } : {}),
    })),
    ...(execution.error ? { error: execution.error } : {}),
    stateLost: execution.stateLost,
    timedOut: execution.timedOut,
  };
  const parts: string[] = [];
  if (execution.stateLost) parts.push('[the context had lost its state: its kernel was restarted]');
  if (out) parts.push(out);
  if (err) parts.push(`[stderr]\n${err}`);
  const main = mainResultText(execution);
  if (main !== undefined) parts.push(main);
  if (execution.error)
    parts.push(execution.error.traceback || `${execution.error.name}: ${execution.error.value}`);
  const images = execution.results.flatMap((r) =>
    r.png !== undefined ? [{ type: 'image' as const, data: r.png, mimeType: 'image/png' }] : [],
  );
  return {
    content: [{ type: 'text', text: parts.join('\n') || '(no output)' }, ...images],
    // An exception is a normal answer (the model reads the traceback), as a non-zero exit is.
    structuredContent: structured,
  };
}
