import { spawn } from 'node:child_process';

export interface CommandResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * spawnSync's result, without blocking the test's worker. A worker blocked for a minute (an
 * image build, `docker-compose up` on a loaded machine) misses vitest's own RPC deadline, and the
 * whole run fails with "Timeout calling onTaskUpdate" though every test passed.
 */
export function runCommand(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    child.once('error', reject);
    child.once('close', (status, signal) => resolve({ status, signal, stdout, stderr }));
  });
}

/** runCommand's stdout; a failure throws with the command and its stderr. */
export async function runOrThrow(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<string> {
  const res = await runCommand(command, args, options);
  if (res.status !== 0)
    throw new Error(`${command} ${args.join(' ')} failed (${res.status ?? res.signal}):\n${res.stderr}`);
  return res.stdout;
}
