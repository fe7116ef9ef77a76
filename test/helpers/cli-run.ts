import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '@sandstream/test-support';
import { expect } from 'vitest';

const cliPath = join(repoRoot, 'libs/client/dist/cli/main.js');

/** Runs the built `sandstream` CLI to its end with `env` over ours; stdout is kept whole (it may be tens of MB). */
export function runCli(
  args: string[],
  env: Record<string, string>,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath, ...args], { env: { ...process.env, ...env } });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    child.once('error', reject);
    child.once('close', (status) => resolve({ status, stdout: Buffer.concat(out).toString('utf8'), stderr }));
  });
}

/**
 * `sandstream logs` of a job whose archive is done: it must read the archive, report nothing lost,
 * and print the step's `seq 1 lines` output whole and in order.
 */
export async function expectLogsFromArchive(options: {
  jobId: string;
  natsUrl: string;
  redisUrl: string;
  namespace: string;
  lines: number;
}): Promise<void> {
  const logs = await runCli(['logs', options.jobId, '--nats-url', options.natsUrl], {
    REDIS_URL: options.redisUrl,
    SANDSTREAM_NAMESPACE: options.namespace,
  });
  expect(logs.status, logs.stderr).toBe(0);
  expect(logs.stderr).toMatch(/output from the log archive/);
  expect(logs.stderr).not.toMatch(/not shown|lost/);
  const printed = logs.stdout.split('\n').filter((line) => /^\d+$/.test(line));
  expect(printed.length).toBe(options.lines);
  let inOrder = true;
  for (let i = 0; i < printed.length; i++) if (printed[i] !== String(i + 1)) inOrder = false;
  expect(inOrder).toBe(true);
}
