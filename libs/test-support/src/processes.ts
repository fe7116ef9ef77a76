import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { pollUntil } from './poll.js';
import { freePort } from './ports.js';
import { testRedisUrl } from './shared-redis.js';

/** The repository's root directory (this file sits two levels below it, in src/ or dist/). */
export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** `api` is started on its own (it needs API_PORT); SERVICE_NAMES are the four a stack always runs. */
export type ServiceName = 'scheduler' | 'pod-lifecycle' | 'step-dispatcher' | 'reaper' | 'api';

/**
 * A built main.js run as a real child process, with its JSON log lines collected: for tests
 * that check start-up, readiness and SIGTERM behaviour end to end. Only PATH is inherited, so
 * the test states every variable the service sees.
 */
export class ServiceProcess {
  readonly lines: Record<string, unknown>[] = [];
  readonly stderr: string[] = [];
  private readonly exited: Promise<number | null>;
  private readonly child: ChildProcess;

  constructor(entry: string, env: Record<string, string>) {
    this.child = spawn(process.execPath, [entry], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      try {
        this.lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        this.stderr.push(line);
      }
    });
    createInterface({ input: this.child.stderr! }).on('line', (line) => this.stderr.push(line));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Resolves with the first log line for which `match` holds; fails early if the process exits. */
  async waitForLog(
    match: (line: Record<string, unknown>) => boolean,
    timeoutMs = 20_000,
  ): Promise<Record<string, unknown>> {
    try {
      const found = await pollUntil(
        'a matching log line',
        () => {
          const line = this.lines.find(match);
          if (line) return { line };
          if (this.child.exitCode !== null) throw new Error('the process exited');
          return undefined;
        },
        { timeoutMs, intervalMs: 20 },
      );
      return found.line;
    } catch (err) {
      throw new Error(
        `no matching log line (${(err as Error).message}); stdout: ${JSON.stringify(this.lines.slice(-5))} stderr: ${this.stderr.slice(-5).join('\n')}`,
      );
    }
  }

  signal(signal: NodeJS.Signals): void {
    this.child.kill(signal);
  }

  /** The exit code, or rejects after timeoutMs (and kills the process). */
  async exitCode(timeoutMs = 30_000): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.child.kill('SIGKILL');
        reject(new Error(`service did not exit within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}

export interface RunningService {
  name: ServiceName;
  child: ChildProcess;
  port: number;
  /** Everything the process wrote, for assertions and failure messages. */
  output: () => string;
  /** SIGTERM, then wait for the exit (SIGKILL after `graceMs`). */
  stop: (graceMs?: number) => Promise<number | null>;
  kill9: () => Promise<void>;
}

/** The four services a stack runs, in the order they are started. */
export const SERVICE_NAMES: readonly ServiceName[] = [
  'scheduler',
  'pod-lifecycle',
  'step-dispatcher',
  'reaper',
];

/** All four services (startService each, one after another) with the same environment. */
export async function startServices(env: Record<string, string>): Promise<RunningService[]> {
  const services: RunningService[] = [];
  for (const name of SERVICE_NAMES) services.push(await startService(name, env));
  return services;
}

/**
 * Starts `node services/<name>/dist/main.js` on the shared Redis (unless `env` names another)
 * with its health endpoint on a free port, and waits until /readyz answers 200.
 */
export async function startService(
  name: ServiceName,
  env: Record<string, string>,
  options: {
    healthTimeoutMs?: number;
    nodeArgs?: string[];
    /** Another checkout's root (ending in `/`) to run the service from: a baseline build. */
    root?: string;
  } = {},
): Promise<RunningService> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), `${options.root ?? repoRoot}services/${name}/dist/main.js`],
    {
      env: {
        ...process.env,
        REDIS_URL: testRedisUrl(),
        LOG_LEVEL: 'info',
        ...env,
        HEALTH_PORT: String(port),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString();
    if (output.length > 2_000_000) output = output.slice(-1_000_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const service: RunningService = {
    name,
    child,
    port,
    output: () => output,
    stop: async (graceMs = 10_000) => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
    kill9: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGKILL');
      await exited;
    },
  };
  try {
    await pollUntil(
      `${name} to answer /readyz`,
      async () => {
        if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}:\n${output}`);
        const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined);
        return res?.ok;
      },
      { timeoutMs: options.healthTimeoutMs ?? 60_000, intervalMs: 100 },
    );
  } catch (err) {
    await service.stop(1000);
    throw new Error(`${name} not healthy: ${(err as Error).message}\n${output}`);
  }
  return service;
}

/**
 * Starts the real agent (agent/dist/main.js) for one job, the way the in-process backend does,
 * for suites that drive the dispatcher without the scheduler and pod-lifecycle.
 */
export function startAgentProcess(options: {
  redisUrl: string;
  jobId: string;
  notifyStream: string;
  workdir: string;
  heartbeatIntervalMs?: number;
}): { child: ChildProcess; exited: Promise<number | null>; output: () => string } {
  const child = spawn(
    process.execPath,
    [
      `${repoRoot}agent/dist/main.js`,
      '--redis-url',
      options.redisUrl,
      '--job-id',
      options.jobId,
      '--key-style',
      'tagged',
      '--notify-stream',
      options.notifyStream,
      '--workdir',
      options.workdir,
      '--heartbeat-interval-ms',
      String(options.heartbeatIntervalMs ?? 500),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  let output = '';
  child.stdout?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    output += c.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}
