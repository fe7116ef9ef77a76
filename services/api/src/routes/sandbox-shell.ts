import type { Terminal } from '@sandstream/client';
import { Limits } from '@sandstream/wire';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { requireAccess } from '../access.js';
import type { ApiContext } from '../api-context.js';
import { problemResponses } from '../plugins/problem-replies.js';
import { HttpProblem, problemBody, problemOf, sendProblem } from '../problem.js';
import { IdParams, ShellQuery } from '../schemas.js';

type ShellRequest = z.output<typeof ShellQuery>;

/** A named shell's terminal id is remembered this long (a terminal's own longest life). */
const NAME_TTL_SECONDS = Limits.runMaxTimeoutSeconds;
/** Messages kept while the terminal is being opened. */
const MAX_EARLY_MESSAGES = 100;

/**
 * What a client sends as a text frame: keystrokes, or the window's new size. Binary frames are
 * keystrokes as they are.
 */
const ControlMessage = z.discriminatedUnion('type', [
  z.object({ type: z.literal('input'), data: z.string().max(1024 * 1024) }),
  z.object({
    type: z.literal('resize'),
    cols: z.number().int().min(1).max(Limits.terminalMaxCols),
    rows: z.number().int().min(1).max(Limits.terminalMaxRows),
  }),
]);

/**
 * GET /v1/sandboxes/{id}/shell as a WebSocket: an interactive shell on a PTY in the sandbox (the
 * SDK's terminals). Output arrives as binary frames; input goes as binary frames or
 * `{"type":"input","data":…}`, a resize as `{"type":"resize","cols":…,"rows":…}`. When the
 * shell ends the server sends `{"type":"exit","exitCode":…}` and closes. With `?name=` the
 * shell outlives the connection and a later connection with the same name attaches to it;
 * without, closing the socket hangs the shell up.
 */
export function sandboxShellRoutes(ctx: ApiContext): FastifyPluginAsyncZod {
  return async (app) => {
    requireAccess(app, 'sandbox');
    // @fastify/websocket hides its routes from the OpenAPI document; this one is part of the API.
    app.addHook('onRoute', (route) => {
      if (route.websocket && route.schema) route.schema.hide = false;
    });
    // A plain GET would get the plugin's empty 404: say what the endpoint wants instead.
    app.addHook('preHandler', async (request, reply) => {
      if (request.headers.upgrade?.toLowerCase() !== 'websocket') {
        return sendProblem(
          request,
          reply,
          new HttpProblem(
            426,
            'upgrade-required',
            'this is a WebSocket endpoint: connect with Upgrade: websocket',
          ),
        );
      }
    });
    app.get(
      '/:id/shell',
      {
        websocket: true,
        schema: {
          tags: ['sandbox shell'],
          summary: 'WebSocket: an interactive shell (PTY) with resize; browsers authenticate with ?ticket=',
          params: IdParams,
          querystring: ShellQuery,
          response: {
            101: z.null().describe('switching to the WebSocket protocol'),
            ...problemResponses(426, 404),
          },
        },
      },
      async (socket, request) => {
        const { id } = request.params;
        const { name, attach } = request.query;
        const stop = new AbortController();
        socket.once('close', () => stop.abort());
        const sendJson = (value: unknown) => {
          if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(value));
        };
        // What the client types before the terminal is open is kept (a little of it) and sent
        // first; every message goes in the order received.
        const early: [Buffer, boolean][] = [];
        let deliver: ((data: Buffer, isBinary: boolean) => void) | undefined;
        socket.on('message', (data: Buffer, isBinary: boolean) => {
          if (deliver) deliver(data, isBinary);
          else if (early.length < MAX_EARLY_MESSAGES) early.push([data, isBinary]);
          else socket.close(1008, 'too much input before the shell started');
        });
        let terminal: Terminal | undefined;
        try {
          terminal = await openTerminal(ctx, id, request.query);
          const open = terminal;
          sendJson({ type: 'started', terminalId: open.id });
          let queue = Promise.resolve();
          deliver = (data, isBinary) => {
            queue = queue
              .then(() => onMessage(open, data, isBinary))
              .catch((err: unknown) =>
                sendJson({ type: 'error', problem: problemBody(request, problemOf(err)) }),
              );
          };
          for (const [data, isBinary] of early.splice(0)) deliver(data, isBinary);
          for await (const chunk of open.output({ from: 'start', signal: stop.signal })) {
            if (socket.readyState !== socket.OPEN) break;
            await sendFrame(socket, chunk);
          }
          if (!stop.signal.aborted) {
            const end = await open.wait();
            sendJson({ type: 'exit', exitCode: end.exitCode });
            socket.close(1000, 'shell ended');
          }
        } catch (err) {
          sendJson({ type: 'error', problem: problemBody(request, problemOf(err)) });
          socket.close(1011, 'error');
        } finally {
          // An unnamed shell belongs to its connection; a named one waits for the next, and one
          // attached to belongs to whoever opened it.
          if (terminal && !name && !attach && stop.signal.aborted) await terminal.kill().catch(() => {});
        }
      },
    );

    async function onMessage(terminal: Terminal, data: Buffer, isBinary: boolean): Promise<void> {
      if (isBinary) return terminal.write(data);
      let json: unknown;
      try {
        json = JSON.parse(data.toString('utf8'));
      } catch {
        json = undefined;
      }
      const parsed = ControlMessage.safeParse(json);
      if (!parsed.success) {
        throw new HttpProblem(
          400,
          'invalid-message',
          'a text frame is {"type":"input","data":…} or {"type":"resize","cols":…,"rows":…}',
        );
      }
      if (parsed.data.type === 'input') return terminal.write(parsed.data.data);
      return terminal.resize(parsed.data.cols, parsed.data.rows);
    }
  };
}

/**
 * The terminal a connection asks for: the one `attach` names, the named one still running, or a
 * new one (the named one's command id is kept in Redis by name).
 */
async function openTerminal(ctx: ApiContext, sandboxId: string, query: ShellRequest): Promise<Terminal> {
  const terminals = ctx.client.sandboxes.handle(sandboxId).terminals;
  if (query.attach) return terminals.attach(query.attach);
  const key = ctx.keys.api(`shells:{${sandboxId}}`);
  if (query.name) {
    const commandId = await ctx.redis.hget(key, query.name);
    const record = commandId ? await ctx.client.get(sandboxId) : null;
    if (commandId && record && !(commandId in record.stepResults)) return terminals.attach(commandId);
  }
  const terminal = await terminals.open({
    ...(query.cols !== undefined ? { cols: query.cols } : {}),
    ...(query.rows !== undefined ? { rows: query.rows } : {}),
    ...(query.command ? { command: query.command } : {}),
    ...(query.env ? { env: envOf(query.env) } : {}),
    ...(query.cwd !== undefined ? { cwd: query.cwd } : {}),
    ...(query.timeoutSeconds !== undefined ? { timeoutSeconds: query.timeoutSeconds } : {}),
  });
  if (query.name)
    await ctx.redis.multi().hset(key, query.name, terminal.id).expire(key, NAME_TTL_SECONDS).exec();
  return terminal;
}

/** `KEY=value` pairs as an environment; a pair without `=` is refused by name. */
function envOf(pairs: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at <= 0)
      throw new HttpProblem(400, 'invalid-request', `env: "${pair}" is not KEY=value`, [
        { field: 'querystring.env', rule: 'KEY=value' },
      ]);
    env[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return env;
}

function sendFrame(socket: WebSocket, chunk: Buffer): Promise<void> {
  return new Promise((resolve) => socket.send(chunk, { binary: true }, () => resolve()));
}
