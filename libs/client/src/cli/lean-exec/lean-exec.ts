import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { StepResult } from '@sandstream/wire';
import { SeqGaps } from '../../seq-gaps.js';
import { ExitCodes, exitCodeForCommand } from '../exit-codes.js';
import { redactUrl } from '../redact-url.js';
import { describeGap } from '../render.js';
import { leanCancelOf, leanPushOf, parseLeanExecLine } from './lean-command-line.js';
import {
  type FullDecoders,
  fastLocalFile,
  jsonOf,
  LEAN_LIMITS,
  LeanDecoders,
  TERMINAL_JOB_STATES,
} from './lean-decode.js';
import { RespConnection, RespError, type RespReply, respTargetOf } from './resp.js';

/**
 * `sandstream exec <id> -- <command…>` without the full CLI: no zod classic schemas, no ioredis,
 * no SDK (issue 33: exec ≤ 1.5× `node -e 0`). The same steps as the full CLI's over Redis
 * (cli/sandbox-commands.ts execInSandbox → command-runner.ts runCommand): push with the
 * sandbox-exec script, then read the sandbox's events stream on the same connection from where
 * the push said it ended until the command's `completed` event (or its result), writing each
 * line as it comes; Ctrl-C pushes a cancel (on a connection of its own) and waits for the
 * cancelled result.
 *
 * Whatever it does not handle it hands back ('fall-through') before anything reached Redis:
 * another flag or form, the HTTP API, a local.json it is not sure of, rediss://, Redis not
 * answering at first, a sandbox not ready yet (the full CLI waits for it). The full CLI then runs
 * the same command line from the start and says what it says.
 */
export interface LeanExecDeps {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  /** Where local.json is looked for, as the full CLI does: the cwd, then the CLI's own directory. */
  searchFrom: readonly string[];
  /** The sandbox-exec script (libs/bus src/lua/sandbox-exec-3.lua, includes inlined) and its sha1. */
  lua: { source: string; sha: string };
  full: () => FullDecoders;
  out: NodeJS.WritableStream;
  err: NodeJS.WritableStream;
  /** Where SIGINT comes from (process). */
  signals: Pick<NodeJS.Process, 'once' | 'removeListener'>;
}

export const FALL_THROUGH = 'fall-through';

/** How long one blocking read waits before the sandbox's state is looked at again (command-runner.ts). */
const BLOCK_MS = 1000;
const RESULT_WAIT_MS = 10_000;

const given = (v: string | undefined) => (v === undefined || v === '' ? undefined : v);

/** resolveConnection (connection-config.ts) for what the lean path takes; undefined: the full CLI's. */
function connectionOf(
  flags: { redisUrl?: string | undefined; namespace?: string | undefined },
  env: NodeJS.ProcessEnv,
  searchFrom: readonly string[],
): { redisUrl: string; namespace: string } | undefined {
  const url = given(flags.redisUrl) ?? given(env.REDIS_URL);
  const namespace = given(flags.namespace) ?? given(env.SANDSTREAM_NAMESPACE);
  const nats = given(env.NATS_URL);
  if (nats !== undefined && !/^(nats|tls|wss?):\/\//.test(nats)) return undefined;
  if (url !== undefined && namespace !== undefined) return { redisUrl: url, namespace };
  let file: ReturnType<typeof fastLocalFile>;
  const path = findLocalFile(searchFrom);
  if (path !== undefined) {
    let raw: string;
    try {
      raw = readFileSync(path, 'utf8');
    } catch {
      return undefined;
    }
    file = fastLocalFile(jsonOf(raw));
    // Unreadable or unsure: the full CLI reads it and warns as it does.
    if (file === undefined) return undefined;
    // An archive from local.json (whose URL the full CLI checks) matters only to `logs`.
  }
  return {
    redisUrl: url ?? file?.redisUrl ?? 'redis://127.0.0.1:6379',
    namespace: namespace ?? file?.namespace ?? 'sandstream',
  };
}

function findLocalFile(searchFrom: readonly string[]): string | undefined {
  for (const start of searchFrom) {
    for (let dir = resolve(start); ; dir = dirname(dir)) {
      const candidate = join(dir, '.cache', 'sandstream', 'local.json');
      if (existsSync(candidate)) return candidate;
      if (dirname(dir) === dir) break;
    }
  }
  return undefined;
}

class LeanExit extends Error {
  constructor(
    readonly code: number,
    message?: string,
  ) {
    super(message ?? '');
  }
}

export async function runLeanExec(deps: LeanExecDeps): Promise<number | typeof FALL_THROUGH> {
  if (given(deps.env.SANDSTREAM_URL) !== undefined) return FALL_THROUGH;
  const line = parseLeanExecLine(deps.argv);
  if (!line) return FALL_THROUGH;
  const resolved = connectionOf(line, deps.env, deps.searchFrom);
  if (!resolved || !/^[A-Za-z0-9_.-]+$/.test(resolved.namespace)) return FALL_THROUGH;
  const target = respTargetOf(resolved.redisUrl);
  if (!target || (target.username !== undefined && target.password === undefined)) return FALL_THROUGH;
  const push = leanPushOf(line, Date.now());
  if (!push) return FALL_THROUGH;

  const options = { reconnects: 30, connectTimeoutMs: 5000 };
  const redis = new RespConnection(target, options);
  try {
    await redis.open();
  } catch {
    // Unreachable: the full CLI's attempts and message ("cannot reach Redis at …").
    return FALL_THROUGH;
  }
  // One connection, for the push and then the follow: its blocking reads wait on it alone, since
  // nothing else is sent meanwhile but a cancel, which dials a connection of its own (a second
  // connection at start cost ~3–7 ms of CPU, of the ~13 ms the goal leaves).
  const reader = redis;
  let control: RespConnection | undefined;
  const decoders = new LeanDecoders(deps.full);
  const id = line.id;
  const jobKey = `job:{${id}}`;
  const prefix = `sandbox:{${id}}:`;
  const events = `${prefix}events`;

  let commandId: string | undefined;
  let aborted = false;
  const cancel = () => {
    if (commandId === undefined) return;
    redis
      .send('LPUSH', `${prefix}control`, leanCancelOf(commandId, 'cancelled by the client'))
      .catch(() => {});
  };
  const onInterrupt = () => {
    aborted = true;
    cancel();
  };
  deps.signals.once('SIGINT', onInterrupt);
  try {
    const pushed = await evalScript(
      redis,
      deps.lua,
      [jobKey, `${prefix}in`, events],
      [
        push.stepHead,
        push.stepTail,
        push.recordHead,
        push.recordTail,
        LEAN_LIMITS.historyLimit,
        LEAN_LIMITS.maxRunningCommands,
        '0',
        '',
        `${prefix}result:`,
      ],
    );
    const [status, detail, lastEventId] = (pushed ?? []) as string[];
    if (status === 'missing' || status === 'not-sandbox')
      throw new LeanExit(ExitCodes.notFound, `sandbox ${id} not found`);
    // Nothing was pushed: the full CLI waits for a sandbox not ready yet, or says why it refuses.
    if (status !== 'pushed') return FALL_THROUGH;
    commandId = String(detail);
    if (aborted) cancel();
    const result = await follow(commandId, String(lastEventId));
    if (aborted && result.cancelled) return ExitCodes.cancelled;
    if (result.exitCode === null && !result.timedOut && !result.cancelled)
      deps.err.write(`sandstream: ${result.errorMessage ?? 'the command did not run'}\n`);
    return exitCodeForCommand(result);
  } catch (err) {
    if (err instanceof LeanExit) {
      if (err.message) deps.err.write(`sandstream: ${err.message}\n`);
      return err.code;
    }
    if (err instanceof Error && err.message === 'Connection is closed.') {
      deps.err.write(`sandstream: ${lost(resolved.redisUrl, redis).message}\n`);
      return ExitCodes.execFailed;
    }
    deps.err.write(`sandstream: ${(err as Error).message ?? String(err)}\n`);
    return ExitCodes.execFailed;
  } finally {
    deps.signals.removeListener('SIGINT', onInterrupt);
    redis.close();
    control?.close();
  }

  /** followCommand (command-runner.ts), writing lines as execInSandbox's callbacks do. */
  async function follow(commandId: string, from: string): Promise<StepResult> {
    let cursor = from;
    const seqs = new SeqGaps();
    let found: StepResult | undefined;
    for (;;) {
      const reply = (
        found
          ? await reader.send('XREAD', 'COUNT', 500, 'STREAMS', events, cursor)
          : await reader.send('XREAD', 'COUNT', 500, 'BLOCK', BLOCK_MS, 'STREAMS', events, cursor)
      ) as [string, [string, string[]][]][] | null;
      const entries = reply?.[0]?.[1] ?? [];
      let ended = false;
      for (const [entryId, fields] of entries) {
        cursor = entryId;
        const decoded = decoders.eventEntry(fields);
        for (const event of decoded) {
          if (event.stepId !== commandId) continue;
          if (event.kind === 'stdout' || event.kind === 'stderr') {
            const text = typeof event.line === 'string' ? event.line : '';
            const gap = seqs.see(Number(event.seq));
            if (gap) deps.err.write(`sandstream: ${describeGap(gap)}\n`);
            (event.kind === 'stdout' ? deps.out : deps.err).write(`${text}\n`);
          } else if (event.kind === 'completed') {
            return event.result ?? (await resultOf(commandId));
          }
        }
        if (decoded.length > 0) continue;
        if (decoders.endsJob(fields)) ended = true;
      }
      if (found && entries.length === 0) return found;
      if (ended || entries.length === 0) {
        found = await findResult(commandId);
        if (found) continue;
        const state = await redis.send('HGET', jobKey, 'state');
        if (state === null) throw new LeanExit(ExitCodes.notFound, `sandbox ${id} not found`);
        if (ended || TERMINAL_JOB_STATES.includes(String(state))) {
          const hash = pairs((await redis.send('HGETALL', jobKey)) as string[]);
          const message = decoders.full.closedMessage(id, hash);
          // A SandboxClosedError under exec is 125; no sandbox record any more: not found.
          if (message === undefined) throw new LeanExit(ExitCodes.notFound, `sandbox ${id} not found`);
          throw new LeanExit(ExitCodes.execFailed, message);
        }
      }
    }
  }

  async function resultOf(commandId: string): Promise<StepResult> {
    const deadline = Date.now() + RESULT_WAIT_MS;
    for (let pause = 2; ; pause = Math.min(pause * 2, 100)) {
      const found = await findResult(commandId);
      if (found) return found;
      if (Date.now() > deadline)
        throw new Error(`command ${commandId} completed but its result never arrived`);
      await new Promise((r) => setTimeout(r, pause));
    }
  }

  /** The result on the record (moved there by the dispatcher) or on its own key, read in one MULTI. */
  async function findResult(commandId: string): Promise<StepResult | undefined> {
    const [, , , replies] = await Promise.all([
      redis.send('MULTI'),
      redis.send('HGET', jobKey, `step:${commandId}`),
      redis.send('GET', `${prefix}result:${commandId}`),
      redis.send('EXEC'),
    ]);
    for (const raw of (replies ?? []) as RespReply[]) {
      if (typeof raw !== 'string') continue;
      const parsed = decoders.stepResult(jsonOf(raw));
      if (parsed && parsed.stepId === commandId) return parsed;
    }
    return undefined;
  }
}

function lost(url: string, connection: RespConnection): Error {
  const cause = connection.lastSocketError?.message ?? 'connection closed';
  return new Error(`lost Redis at ${redactUrl(url)}: ${cause}`);
}

function pairs(flat: readonly string[] | null): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; flat && i + 1 < flat.length; i += 2) out[flat[i] as string] = flat[i + 1] as string;
  return out;
}

/** LuaScript.run: EVALSHA, then EVAL once when the server does not know the script yet. */
async function evalScript(
  redis: RespConnection,
  lua: { source: string; sha: string },
  keys: string[],
  args: (string | number)[],
): Promise<RespReply> {
  try {
    return await redis.send('EVALSHA', lua.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof RespError) || !err.message.includes('NOSCRIPT')) throw err;
    return await redis.send('EVAL', lua.source, keys.length, ...keys, ...args);
  }
}
