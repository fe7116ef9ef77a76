import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../libs/sandbox/src/testing/redis-server.js';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export type ServiceName = 'scheduler' | 'pod-lifecycle' | 'step-dispatcher' | 'reaper';

/** A random namespace for one test run: every shared key and queue of the run lives under it. */
export function uniqueNamespace(label = 't'): string {
  return `${label}-${randomBytes(4).toString('hex')}`;
}

export { freePort };

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

/** Starts `node services/<name>/dist/main.js` and waits until its health endpoint answers 200. */
export async function startService(
  name: ServiceName,
  env: Record<string, string>,
  options: { healthTimeoutMs?: number; nodeArgs?: string[] } = {},
): Promise<RunningService> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [...(options.nodeArgs ?? []), `${repoRoot}services/${name}/dist/main.js`],
    {
      env: { ...process.env, REDIS_URL: redisUrl, LOG_LEVEL: 'info', ...env, HEALTH_PORT: String(port) },
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
  const deadline = Date.now() + (options.healthTimeoutMs ?? 60_000);
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}:\n${output}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (res.ok) return service;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await service.stop(1000);
  throw new Error(`${name} not healthy within the timeout:\n${output}`);
}

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 20_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
