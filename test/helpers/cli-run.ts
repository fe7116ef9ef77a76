import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '@sandstream/test-support';

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
