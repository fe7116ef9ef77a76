import type { Sandbox, Terminal } from '@sandstream/client';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { E2bPids } from './e2b-pids.js';
import type { ProcessConfig, Pty } from './e2b-process-schemas.js';
import { ProcessEventStream } from './e2b-process-stream.js';

/**
 * E2B's PTYs (`sandbox.pty`) on our terminals: process.Process/Start with a `pty` opens one,
 * its output goes out as `data.pty` events, SendInput's `pty` bytes are keystrokes, Update's
 * size is a resize, SendSignal hangs it up.
 */

/**
 * The terminal's program: the SDK asks for `/bin/bash -i -l`, which is the image's interactive
 * shell (our terminals pick bash, else sh: images need not have bash). Anything else is an argv.
 */
function terminalCommand(config: ProcessConfig): string[] | undefined {
  const [i, l] = config.args;
  if (config.cmd === '/bin/bash' && config.args.length === 2 && i === '-i' && l === '-l') return undefined;
  return [config.cmd, ...config.args];
}

/**
 * The terminal's output as data events until it ends, then its end; a caller that goes away
 * stops following only (the terminal goes on until killed, it times out or the sandbox closes).
 */
async function streamTerminal(
  stream: ProcessEventStream,
  terminal: Terminal,
  from: 'start' | 'now',
): Promise<void> {
  try {
    for await (const chunk of terminal.output({ from, signal: stream.gone }))
      stream.queue(() => ({ data: { pty: chunk.toString('base64') } }));
    if (stream.gone.aborted) {
      stream.close();
      return;
    }
    await stream.finish(await terminal.wait());
  } catch (err) {
    await stream.fail(err);
  }
}

/** process.Process/Start with a pty: opens the terminal, answers its pid, then its output. */
export async function startPty(
  request: FastifyRequest,
  reply: FastifyReply,
  pids: E2bPids,
  sandbox: Sandbox,
  config: ProcessConfig,
  pty: Pty,
  timeoutSeconds: number | undefined,
): Promise<void> {
  const command = terminalCommand(config);
  // Opening is checked before the stream answers: a refusal is the call's own error.
  const terminal = await sandbox.terminals.open({
    ...(command ? { command } : {}),
    cols: pty.size.cols,
    rows: pty.size.rows,
    ...(config.cwd !== undefined ? { cwd: config.cwd } : {}),
    ...(Object.keys(config.envs).length > 0 ? { env: config.envs } : {}),
    ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
  });
  const pid = await pids.assign(sandbox.id, terminal.id, 'pty');
  const stream = new ProcessEventStream(request, reply);
  stream.queue(() => ({ start: { pid } }));
  await streamTerminal(stream, terminal, 'start');
}

/** process.Process/Connect to a terminal: its pid, then its output from now on. */
export async function connectPty(
  request: FastifyRequest,
  reply: FastifyReply,
  sandbox: Sandbox,
  commandId: string,
  pid: number,
): Promise<void> {
  const terminal = await sandbox.terminals.attach(commandId);
  const stream = new ProcessEventStream(request, reply);
  stream.queue(() => ({ start: { pid } }));
  await streamTerminal(stream, terminal, 'now');
}
