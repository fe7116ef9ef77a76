import { type ChildProcess, spawn } from 'node:child_process';
import { repoRoot } from './services.js';

/**
 * Starts the real agent (agent/dist/main.js) for one job, the way the in-process backend does,
 * for suites that drive the dispatcher without the scheduler and pod-lifecycle.
 */
export function startAgent(options: {
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
