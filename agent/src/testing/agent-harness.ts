import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pollUntil, testRedisUrl } from '@sandstream/test-support';

export { childPids, peakRssKb, rssKb } from '@sandstream/test-support';

import {
  decodeEventEntry,
  type KeyStyle,
  resultKey,
  type SandboxKeys,
  type StepEvent,
  type StepInput,
  type StepResult,
  StepResultSchema,
  sandboxKeys,
} from '@sandstream/wire';
import { Redis } from 'ioredis';
import { SPAWNER_NAME } from '../process/locate-spawner.js';

/**
 * Test support for the agent's end-to-end suites: spawn the built agent (dist/main.js) as a
 * real child process against a real Redis, and read what it wrote. Never imported by the agent.
 */
/** The built agent; SANDSTREAM_AGENT_MAIN overrides it (the benchmarks run from a compiled copy of this file). */
export function agentMain(): string {
  const override = process.env.SANDSTREAM_AGENT_MAIN;
  return override ? resolve(override) : fileURLToPath(new URL('../../dist/main.js', import.meta.url));
}

export function uniqueJobId(prefix = 'agent-test'): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

export function testClient(url = testRedisUrl()): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, retryStrategy: () => 100 });
}

export interface AgentProcess {
  readonly child: ChildProcess;
  readonly jobId: string;
  readonly keys: SandboxKeys;
  /** Resolves with the exit code (or null and the signal) once the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything the agent wrote to stderr so far (JSON log lines). */
  stderr(): string;
  /** Parsed log lines. */
  logs(): Record<string, unknown>[];
}

export interface StartAgentOptions {
  redisUrl?: string;
  jobId?: string;
  keyStyle?: KeyStyle;
  extraArgs?: string[];
  env?: Record<string, string>;
  cwd?: string;
  /** Omit --redis-url / --job-id (to test the environment form or their absence). */
  bareArgs?: boolean;
  /**
   * The program and its leading arguments; default `node dist/main.js`. The benchmarks pass the
   * single executable (through its bundled loader) here to measure it the same way.
   */
  command?: readonly string[];
}

/**
 * The native spawner as `npm run build` leaves it, beside the built agent (dist/runtime/lib).
 * Tests that need it fail with this message rather than skip: a checkout whose build could not
 * compile it is a broken build, not a reason to test less.
 */
export function builtSpawnerPath(distDir = resolve(agentMain(), '..')): string {
  const path = resolve(distDir, 'runtime', 'lib', SPAWNER_NAME);
  if (!existsSync(path))
    throw new Error(`${path} is missing: run npm run build (needs gcc, g++ and libc6-dev)`);
  return path;
}

/**
 * The single executable as a sandbox starts it: through the bundled loader, not the host's.
 * `dir` holds the executable; `lib` the loader and libraries (`runtime/lib` of a build; an
 * injected copy's own `lib/`).
 */
export function seaCommand(dir = resolve(agentMain(), '..'), lib = resolve(dir, 'runtime', 'lib')): string[] {
  return [resolve(lib, 'ld-linux-x86-64.so.2'), '--library-path', lib, resolve(dir, 'sandstream-agent')];
}

/** Evicts a file's pages from the page cache (GNU dd: iflag=nocache with count=0 means the whole file). */
export function dropFromPageCache(file: string): void {
  const result = spawnSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
  if (result.status !== 0) throw new Error(`could not drop ${file} from the page cache: ${result.stderr}`);
}

export function startAgent(options: StartAgentOptions = {}): AgentProcess {
  const jobId = options.jobId ?? uniqueJobId();
  const keyStyle = options.keyStyle ?? 'plain';
  const args = options.bareArgs
    ? [...(options.extraArgs ?? [])]
    : [
        '--redis-url',
        options.redisUrl ?? testRedisUrl(),
        '--job-id',
        jobId,
        '--key-style',
        keyStyle,
        ...(options.extraArgs ?? []),
      ];
  const [program, ...leading] = options.command ?? [process.execPath, agentMain()];
  const child = spawn(program as string, [...leading, ...args], {
    cwd: options.cwd ?? process.cwd(),
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return {
    child,
    jobId,
    keys: sandboxKeys(jobId, keyStyle),
    exited,
    stderr: () => err,
    logs: () =>
      err
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

export async function pushStep(redis: Redis, keys: SandboxKeys, step: StepInput | string): Promise<void> {
  await redis.lpush(keys.in, typeof step === 'string' ? step : JSON.stringify(step));
}

/** Pops the next result (the agent LPUSHes, so the oldest is on the right). */
/**
 * A step's result as an agent under the services writes it (a notify stream set): on its own key
 * (wire resultKey), taken off it. Polled: the key is SET, not pushed.
 */
export async function takeResult(
  redis: Redis,
  keys: SandboxKeys,
  stepId: string,
  timeoutSeconds = 20,
): Promise<StepResult> {
  const key = resultKey(keys, stepId);
  const until = Date.now() + timeoutSeconds * 1000;
  for (;;) {
    const raw = await redis.getdel(key);
    if (raw) return StepResultSchema.parse(JSON.parse(raw));
    if (Date.now() > until) throw new Error(`no result on ${key} within ${timeoutSeconds} s`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A step's result as a standalone agent writes it: popped off the results list. */
export async function popResult(redis: Redis, keys: SandboxKeys, timeoutSeconds = 20): Promise<StepResult> {
  const popped = await redis.brpop(keys.results, timeoutSeconds);
  if (!popped) throw new Error(`no result on ${keys.results} within ${timeoutSeconds} s`);
  return StepResultSchema.parse(JSON.parse(popped[1]));
}

export async function readEvents(redis: Redis, keys: SandboxKeys, stepId?: string): Promise<StepEvent[]> {
  const entries = await redis.xrange(keys.events, '-', '+');
  const events: StepEvent[] = [];
  for (const [, fields] of entries) {
    for (const event of decodeEventEntry(fields))
      if (stepId === undefined || event.stepId === stepId) events.push(event);
  }
  return events;
}

/**
 * How the agent's tests poll with `vi.waitUntil`: often (the agent reacts within milliseconds),
 * for up to 10 s. Benchmarks, which run outside vitest, use test-support's `pollUntil`.
 */
export const POLL = { timeout: 10_000, interval: 20 } as const;

export async function deleteKeys(redis: Redis, keys: SandboxKeys): Promise<void> {
  await redis.del(keys.in, keys.events, keys.results, keys.heartbeat, keys.control);
}

/** True while the process exists and is not a zombie (an exited child nobody reaped yet). */
export function isAlive(pid: number): boolean {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    return !/^State:\s+Z/m.test(status);
  } catch {
    return false;
  }
}

/** Polls until the process is gone (or a zombie); false if it still runs after `withinMs`. */
export function waitDead(pid: number, withinMs: number): Promise<boolean> {
  return pollUntil(`pid ${pid} to end`, () => !isAlive(pid), { timeoutMs: withinMs, intervalMs: 20 }).catch(
    () => false,
  );
}

/** Test cleanup: make sure an agent a failed test left behind does not linger. */
export async function stopAgent(agent: AgentProcess): Promise<void> {
  if (agent.child.exitCode !== null || agent.child.signalCode !== null) return;
  agent.child.kill('SIGKILL');
  await agent.exited;
}
