import type { CommandExecution, CommandHistoryEntry, Sandbox } from '@sandstream/client';
import { Limits } from '@sandstream/wire';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ApiContext } from '../api-context.js';
import { HttpProblem } from '../problem.js';
import { connectTimeoutMs, requestMessage } from './e2b-connect-stream.js';
import { connectErrors, parseMessage, unsupported } from './e2b-errors.js';
import { E2bPids } from './e2b-pids.js';
import {
  CloseStdinRequestSchema,
  type ProcessConfig,
  SelectRequestSchema,
  SendInputRequestSchema,
  SendSignalRequestSchema,
  StartRequestSchema,
  UpdateRequestSchema,
} from './e2b-process-schemas.js';
import { ProcessEventStream } from './e2b-process-stream.js';
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

/**
 * A command's stream: the start event with its pid, its output as data events (each line as the
 * agent sent it, with its newline), then its end (e2b-process-stream.ts).
 */
async function streamCommand(
  request: FastifyRequest,
  reply: FastifyReply,
  pids: E2bPids,
  sandbox: Sandbox,
  known: { commandId: string; pid: number } | undefined,
  run: (hooks: {
    onStart: (commandId: string) => void;
    onStdout: (line: string) => void;
    onStderr: (line: string) => void;
    signal: AbortSignal;
  }) => CommandExecution,
): Promise<void> {
  const stream = new ProcessEventStream(request, reply);
  if (known) stream.queue(() => ({ start: { pid: known.pid } }));
  try {
    const result = await run({
      onStart: (commandId) =>
        stream.queue(async () => ({ start: { pid: await pids.assign(sandbox.id, commandId) } })),
      onStdout: (line) =>
        stream.queue(() => ({ data: { stdout: Buffer.from(`${line}\n`).toString('base64') } })),
      onStderr: (line) =>
        stream.queue(() => ({ data: { stderr: Buffer.from(`${line}\n`).toString('base64') } })),
      signal: stream.gone,
    });
    await stream.finish(result);
  } catch (err) {
    await stream.fail(err);
  }
}

/** How E2B's List shows one of ours: a shell line as the SDK sent it, a terminal's shell as its PTY. */
function configOf(entry: CommandHistoryEntry): ProcessConfig {
  if (entry.terminal !== undefined && entry.command === undefined)
    return { cmd: '/bin/bash', args: ['-i', '-l'], envs: {} };
  if (entry.shell === true && entry.command !== undefined)
    return { cmd: '/bin/bash', args: ['-l', '-c', entry.command], envs: {} };
  return { cmd: entry.command ?? '', args: entry.args ?? [], envs: {} };
}

/** Keystrokes and window sizes are a terminal's: a command's pid refuses them. */
function notPty(process: { pid: number } | { tag: string }, call: string): HttpProblem {
  const pid = 'pid' in process ? process.pid : process.tag;
  return new HttpProblem(400, 'invalid-request', `process.Process/${call}: process ${pid} is not a PTY`, [
    { field: 'process.pid', rule: 'the pid of a PTY (pty.create)' },
  ]);
}

/** A selector by pid (by tag is not served: we give no process a tag). */
function pidOf(process: { pid: number } | { tag: string }, call: string): number {
  if (!('pid' in process)) throw unsupported(`process.Process/${call} by tag`);
  return process.pid;
}

/**
 * E2B's `process.Process` service (Connect, JSON) on our commands and terminals: Start
 * (foreground and background commands alike: the SDK keeps the stream; with a pty, a terminal),
 * Connect (follow a running one by pid), List, SendSignal (kill), SendInput and Update for
 * terminals (keystrokes, window size), SendInput and CloseStdin for commands started with stdin
 * (their open stdin). StreamInput answers unimplemented, naming the call.
 */
export function e2bProcessRoutes(ctx: ApiContext): FastifyPluginAsync {
  return async (app) => {
    app.setErrorHandler(connectErrors);
    const pids = new E2bPids(ctx);

    app.post('/process.Process/Start', async (request, reply) => {
      const start = parseMessage(StartRequestSchema, requestMessage(request.body), 'process.Process/Start');
      const sandbox = await headerSandbox(ctx, request);
      const timeoutMs = connectTimeoutMs(request);
      const timeoutSeconds =
        timeoutMs === undefined ? undefined : Math.min(Limits.runMaxTimeoutSeconds, timeoutMs / 1000);
      const config = start.process;
      if (start.pty !== undefined) {
        await startPty(request, reply, pids, sandbox, config, start.pty, timeoutSeconds);
        return reply;
      }
      await streamCommand(request, reply, pids, sandbox, undefined, (hooks) =>
        sandbox.exec(commandOf(config), {
          ...(config.cwd !== undefined ? { cwd: config.cwd } : {}),
          ...(Object.keys(config.envs).length > 0 ? { env: config.envs } : {}),
          ...(timeoutSeconds !== undefined ? { timeoutSeconds } : {}),
          ...(start.stdin === true ? { openStdin: true } : {}),
          ...hooks,
        }),
      );
      return reply;
    });

    app.post('/process.Process/Connect', async (request, reply) => {
      const { process } = parseMessage(
        SelectRequestSchema,
        requestMessage(request.body),
        'process.Process/Connect',
      );
      const pid = pidOf(process, 'Connect');
      const sandbox = await headerSandbox(ctx, request);
      const target = await pids.targetOf(sandbox.id, pid);
      if (target.kind === 'pty') {
        await connectPty(request, reply, sandbox, target.commandId, pid);
        return reply;
      }
      const { commandId } = target;
      await streamCommand(request, reply, pids, sandbox, { commandId, pid }, (hooks) =>
        // Following is not owning: a client that goes away stops following, the command goes on.
        sandbox.attach(commandId, {
          onStdout: hooks.onStdout,
          onStderr: hooks.onStderr,
          stopFollowing: hooks.signal,
        }),
      );
      return reply;
    });

    app.post('/process.Process/List', async (request) => {
      const sandbox = await headerSandbox(ctx, request);
      const [history, known] = await Promise.all([sandbox.history(), pids.all(sandbox.id)]);
      const processes = history.flatMap((entry) => {
        const pid = known.get(entry.id);
        if (entry.result !== undefined || pid === undefined) return [];
        return [{ pid, config: configOf(entry) }];
      });
      return { processes };
    });

    app.post('/process.Process/SendSignal', async (request) => {
      const { process } = parseMessage(SendSignalRequestSchema, request.body, 'process.Process/SendSignal');
      const sandbox = await headerSandbox(ctx, request);
      const target = await pids.targetOf(sandbox.id, pidOf(process, 'SendSignal'));
      // Either signal ends the command's whole tree, as our cancel does; a terminal is hung up.
      if (target.kind === 'pty') await (await sandbox.terminals.attach(target.commandId)).kill();
      else await sandbox.cancel(target.commandId);
      return {};
    });

    app.post('/process.Process/SendInput', async (request) => {
      const { process, input } = parseMessage(
        SendInputRequestSchema,
        request.body,
        'process.Process/SendInput',
      );
      const sandbox = await headerSandbox(ctx, request);
      const target = await pids.targetOf(sandbox.id, pidOf(process, 'SendInput'));
      if ('stdin' in input) {
        // A terminal's stdin is its keystrokes; a command's is its open stdin (Start with stdin).
        if (target.kind === 'pty')
          await (await sandbox.terminals.attach(target.commandId)).write(Buffer.from(input.stdin, 'base64'));
        else await sandbox.writeStdin(target.commandId, Buffer.from(input.stdin, 'base64'));
        return {};
      }
      if (target.kind !== 'pty') throw notPty(process, 'SendInput');
      await (await sandbox.terminals.attach(target.commandId)).write(Buffer.from(input.pty, 'base64'));
      return {};
    });

    app.post('/process.Process/CloseStdin', async (request) => {
      const { process } = parseMessage(CloseStdinRequestSchema, request.body, 'process.Process/CloseStdin');
      const sandbox = await headerSandbox(ctx, request);
      const target = await pids.targetOf(sandbox.id, pidOf(process, 'CloseStdin'));
      if (target.kind === 'pty') throw unsupported('process.Process/CloseStdin of a PTY');
      await sandbox.closeStdin(target.commandId);
      return {};
    });

    app.post('/process.Process/Update', async (request) => {
      const { process, pty } = parseMessage(UpdateRequestSchema, request.body, 'process.Process/Update');
      const sandbox = await headerSandbox(ctx, request);
      const target = await pids.targetOf(sandbox.id, pidOf(process, 'Update'));
      if (target.kind !== 'pty') throw notPty(process, 'Update');
      if (pty !== undefined)
        await (await sandbox.terminals.attach(target.commandId)).resize(pty.size.cols, pty.size.rows);
      return {};
    });

    // A client stream (HTTP/2 or a whole body of envelopes); the SDK's commands use SendInput.
    app.post('/process.Process/StreamInput', async () => {
      throw unsupported('process.Process/StreamInput (streamed stdin; SendInput is served)');
    });
  };
}
