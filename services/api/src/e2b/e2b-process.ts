import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { CommandExecution, CommandHistoryEntry, Sandbox } from '@sandstream/client';
import type { ApiContext } from '../api-context.js';
import type { Process, ProcessConfig, ProcessSelector } from '../gen/process/process_pb.js';
import { HttpProblem } from '../problem.js';
import { requestOf, timeoutSecondsOf } from './e2b-connect.js';
import { parseMessage, unsupported } from './e2b-errors.js';
import { E2bPids } from './e2b-pids.js';
import { StartRequestSchema, UpdateRequestSchema } from './e2b-process-schemas.js';
import {
  dataEvent,
  finish,
  type ProcessStreamMessage,
  processEvents,
  startEvent,
} from './e2b-process-stream.js';
import { connectPty, startPty } from './e2b-pty.js';
import { headerSandbox } from './e2b-sandbox.js';

/**
 * The command as we run it: E2B's SDK sends every command as `/bin/bash -l -c <cmd>`; that is a
 * shell line, run by the sandbox's shell (images need not have bash). Anything else is an argv.
 */
function commandOf(config: ProcessConfig): string | string[] {
  const [flag, c, line] = config.args;
  if (
    config.cmd === '/bin/bash' &&
    flag === '-l' &&
    c === '-c' &&
    line !== undefined &&
    config.args.length === 3
  )
    return line;
  return [config.cmd, ...config.args];
}

interface CommandHooks {
  onStart: (commandId: string) => void;
  onStdout: (line: string) => void;
  onStderr: (line: string) => void;
  signal: AbortSignal;
}

/**
 * A command's stream: the start event with its pid, its output as data events (each line as the
 * agent sent it, with its newline), then its end (e2b-process-stream.ts). The call's signal is
 * the caller going away (or its deadline).
 */
function streamCommand(
  context: HandlerContext,
  pids: E2bPids,
  sandbox: Sandbox,
  known: { commandId: string; pid: number } | undefined,
  run: (hooks: CommandHooks) => CommandExecution,
): AsyncIterable<ProcessStreamMessage> {
  const queue = processEvents(context);
  if (known) queue.push(startEvent(known.pid));
  const line = (text: string) => Buffer.from(`${text}\n`);
  const execution = (async () =>
    run({
      onStart: (commandId) => queue.push(pids.assign(sandbox.id, commandId).then(startEvent)),
      onStdout: (text) => queue.push(dataEvent('stdout', line(text))),
      onStderr: (text) => queue.push(dataEvent('stderr', line(text))),
      signal: context.signal,
    }))();
  execution.then(
    (result) => finish(queue, context, result),
    (err: unknown) => queue.end(err),
  );
  return queue;
}

/** How E2B's List shows one of ours: a shell line as the SDK sent it, a terminal's shell as its PTY. */
function configOf(entry: CommandHistoryEntry): { cmd: string; args: string[] } {
  if (entry.terminal !== undefined && entry.command === undefined)
    return { cmd: '/bin/bash', args: ['-i', '-l'] };
  if (entry.shell === true && entry.command !== undefined)
    return { cmd: '/bin/bash', args: ['-l', '-c', entry.command] };
  return { cmd: entry.command ?? '', args: entry.args ?? [] };
}

/** Keystrokes and window sizes are a terminal's: a command's pid refuses them. */
function notPty(pid: number, call: string): HttpProblem {
  return new HttpProblem(400, 'invalid-request', `process.Process/${call}: process ${pid} is not a PTY`, [
    { field: 'process.pid', rule: 'the pid of a PTY (pty.create)' },
  ]);
}

/** A selector by pid (by tag is not served: we give no process a tag). */
function pidOf(process: ProcessSelector | undefined, call: string): number {
  const selector = process?.selector;
  if (selector?.case === 'tag') throw unsupported(`process.Process/${call} by tag`);
  if (selector?.case !== 'pid')
    throw new HttpProblem(400, 'invalid-request', `process.Process/${call}: process.pid is required`);
  return selector.value;
}

/**
 * E2B's `process.Process` service (generated from proto/process/process.proto, served by
 * connect-fastify's plugin) on our commands and terminals: Start (foreground and background
 * commands alike: the SDK keeps the stream; with a pty, a terminal), Connect (follow a running
 * one by pid), List, SendSignal (kill), SendInput and Update for terminals (keystrokes, window
 * size), SendInput and CloseStdin for commands started with stdin (their open stdin).
 * StreamInput answers unimplemented, naming the call.
 */
export function processService(ctx: ApiContext): ServiceImpl<typeof Process> {
  const pids = new E2bPids(ctx);
  const sandboxOf = (context: HandlerContext) => headerSandbox(ctx, requestOf(context));
  const target = async (context: HandlerContext, process: ProcessSelector | undefined, call: string) => {
    const sandbox = await sandboxOf(context);
    const pid = pidOf(process, call);
    return { sandbox, pid, ...(await pids.targetOf(sandbox.id, pid)) };
  };

  return {
    async *start(start, context) {
      parseMessage(StartRequestSchema, start, 'process.Process/Start');
      const config = start.process!;
      const sandbox = await sandboxOf(context);
      const timeoutSeconds = timeoutSecondsOf(context);
      if (start.pty?.size !== undefined) {
        yield* await startPty(context, pids, sandbox, config, start.pty.size, timeoutSeconds);
        return;
      }
      yield* streamCommand(context, pids, sandbox, undefined, (hooks) =>
        sandbox.exec(commandOf(config), {
          ...(config.cwd !== undefined ? { cwd: config.cwd } : {}),
          ...(Object.keys(config.envs).length > 0 ? { env: config.envs } : {}),
          ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
          ...(start.stdin === true ? { openStdin: true } : {}),
          ...hooks,
        }),
      );
    },

    async *connect({ process }, context) {
      const { sandbox, pid, kind, commandId } = await target(context, process, 'Connect');
      if (kind === 'pty') {
        yield* await connectPty(context, sandbox, commandId, pid);
        return;
      }
      yield* streamCommand(context, pids, sandbox, { commandId, pid }, (hooks) =>
        // Following is not owning: a client that goes away stops following, the command goes on.
        sandbox.attach(commandId, {
          onStdout: hooks.onStdout,
          onStderr: hooks.onStderr,
          stopFollowing: hooks.signal,
        }),
      );
    },

    async list(_request, context) {
      const sandbox = await sandboxOf(context);
      const [history, known] = await Promise.all([sandbox.history(), pids.all(sandbox.id)]);
      const processes = history.flatMap((entry) => {
        const pid = known.get(entry.id);
        if (entry.result !== undefined || pid === undefined) return [];
        return [{ pid, config: configOf(entry) }];
      });
      return { processes };
    },

    async sendSignal({ process }, context) {
      const { sandbox, kind, commandId } = await target(context, process, 'SendSignal');
      // Either signal ends the command's whole tree, as our cancel does; a terminal is hung up.
      if (kind === 'pty') await (await sandbox.terminals.attach(commandId)).kill();
      else await sandbox.cancel(commandId);
      return {};
    },

    async sendInput({ process, input }, context) {
      const { sandbox, pid, kind, commandId } = await target(context, process, 'SendInput');
      const bytes = input?.input;
      if (bytes?.case === 'stdin') {
        // A terminal's stdin is its keystrokes; a command's is its open stdin (Start with stdin).
        if (kind === 'pty') await (await sandbox.terminals.attach(commandId)).write(Buffer.from(bytes.value));
        else await sandbox.writeStdin(commandId, Buffer.from(bytes.value));
        return {};
      }
      if (bytes?.case !== 'pty')
        throw new HttpProblem(
          400,
          'invalid-request',
          'process.Process/SendInput: input.stdin or input.pty is required',
        );
      if (kind !== 'pty') throw notPty(pid, 'SendInput');
      await (await sandbox.terminals.attach(commandId)).write(Buffer.from(bytes.value));
      return {};
    },

    async closeStdin({ process }, context) {
      const { sandbox, kind, commandId } = await target(context, process, 'CloseStdin');
      if (kind === 'pty') throw unsupported('process.Process/CloseStdin of a PTY');
      await sandbox.closeStdin(commandId);
      return {};
    },

    async update(update, context) {
      parseMessage(UpdateRequestSchema, update, 'process.Process/Update');
      const { sandbox, pid, kind, commandId } = await target(context, update.process, 'Update');
      if (kind !== 'pty') throw notPty(pid, 'Update');
      const size = update.pty?.size;
      if (size !== undefined) await (await sandbox.terminals.attach(commandId)).resize(size.cols, size.rows);
      return {};
    },

    // A client stream (HTTP/2 or a whole body of envelopes); the SDK's commands use SendInput.
    async streamInput() {
      throw unsupported('process.Process/StreamInput (streamed stdin; SendInput is served)');
    },
  };
}
