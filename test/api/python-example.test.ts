import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { repoRoot } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiStack, startApiStack } from '../helpers/api-stack.js';

// examples/python: an agent's tool loop in Python (standard library only) against the real
// services through the HTTP API, run as a user would run it.
const example = join(repoRoot, 'examples', 'python', 'agent_loop.py');

function runPython(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; lines: string[]; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', [example, ...args], { env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, lines: stdout.split('\n').filter(Boolean), stderr }));
  });
}

describe('examples/python against the API', () => {
  let api: ApiStack;
  beforeAll(async () => {
    api = await startApiStack({ label: 'py' });
  });
  afterAll(async () => {
    await api?.stop();
  });

  it('creates a sandbox, streams command output, writes and reads a file, closes it', async () => {
    const run = await runPython(['--url', api.url], {});
    expect(run.code, run.stderr).toBe(0);
    const [ready, ...rest] = run.lines;
    expect(ready).toMatch(/^sandbox \S+ ready$/);
    expect(rest).toEqual([
      'wrote 52 bytes',
      '[stdout] hello 1',
      '[stdout] hello 2',
      '[stdout] hello 3',
      'exit 0',
      'exit 3 stderr oops',
      'count 3',
      'files greet.sh',
      'refused 400 body.timeout',
      'closed closed (user)',
    ]);
    // The sandbox it made is closed in the services' own record too.
    const id = (ready as string).split(' ')[1] as string;
    expect(await (await api.request(`/v1/sandboxes/${id}`)).json()).toMatchObject({
      state: 'closed',
      reason: 'user',
    });
  });

  it('sends its key from SANDSTREAM_API_KEY: a wrong one is refused with the problem the API sent (exit 1)', async () => {
    const wrong = await runPython(['--url', api.url], { SANDSTREAM_API_KEY: 'not-a-key' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/SandstreamError: 401 /);
    const { key } = await api.key('py');
    const right = await runPython(['--url', api.url], { SANDSTREAM_API_KEY: key });
    expect(right.code, right.stderr).toBe(0);
  });
});
