import type { HandlerContext } from '@connectrpc/connect';
import type { Sandbox, Terminal } from '@sandstream/client';
import type { ProcessConfig, PTY_Size } from '../gen/process/process_pb.js';
import { deadlineOf } from './e2b-connect.js';
import type { E2bPids } from './e2b-pids.js';
import {
  dataEvent,
  finish,
  type ProcessStreamMessage,
  processEvents,
  startEvent,
  timedOut,
} from './e2b-process-stream.js';
import type { EventQueue } from './event-queue.js';

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
  queue: EventQueue<ProcessStreamMessage>,
  context: HandlerContext,
  terminal: Terminal,
  from: 'start' | 'now',
): Promise<void> {
  try {
    for await (const chunk of terminal.output({ from, signal: context.signal }))
      queue.push(dataEvent('pty', chunk));
    if (context.signal.aborted) {
      // The call's deadline is a timeout (the terminal's own, ending now); else the caller left.
      queue.end(deadlineOf(context) ? timedOut() : undefined);
      return;
    }
    finish(queue, context, await terminal.wait());
  } catch (err) {
    queue.end(err);
  }
}

/** process.Process/Start with a pty: opens the terminal, answers its pid, then its output. */
export async function startPty(
  context: HandlerContext,
  pids: E2bPids,
  sandbox: Sandbox,
  config: ProcessConfig,
  size: PTY_Size,
  timeoutSeconds: number | undefined,
): Promise<AsyncIterable<ProcessStreamMessage>> {
  const command = terminalCommand(config);
  // Opening is checked before the stream answers: a refusal is the call's own error.
  const terminal = await sandbox.terminals.open({
    ...(command ? { command } : {}),
    cols: size.cols,
    rows: size.rows,
    ...(config.cwd !== undefined ? { cwd: config.cwd } : {}),
    ...(Object.keys(config.envs).length > 0 ? { env: config.envs } : {}),
    ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
  });
  const pid = await pids.assign(sandbox.id, terminal.id, 'pty');
  const queue = processEvents(context);
  queue.push(startEvent(pid));
  void streamTerminal(queue, context, terminal, 'start');
  return queue;
}

/** process.Process/Connect to a terminal: its pid, then its output from now on. */
export async function connectPty(
  context: HandlerContext,
  sandbox: Sandbox,
  commandId: string,
  pid: number,
): Promise<AsyncIterable<ProcessStreamMessage>> {
  const terminal = await sandbox.terminals.attach(commandId);
  const queue = processEvents(context);
  queue.push(startEvent(pid));
  void streamTerminal(queue, context, terminal, 'now');
  return queue;
}
