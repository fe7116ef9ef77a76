import { expect } from 'vitest';
import type { Stack } from '../helpers/services-stack.js';
import { outputLines } from './job-helpers.js';

/**
 * The same short tour on any backend or Redis topology: all step kinds, a streamed run step,
 * a failing step, and a cancel.
 */
export async function runSmoke(stack: Stack, image: string, timeoutMs = 120_000): Promise<void> {
  const ns = stack.namespace;
  const ok = await stack.client.submit({
    id: `${ns}-smoke`,
    image,
    steps: [
      { kind: 'writeFile', path: 'smoke/hello.txt', content: 'hello\nsmoke world\n' },
      { command: 'cat', args: ['smoke/hello.txt'] },
      { kind: 'readFile', path: 'smoke/hello.txt' },
      { kind: 'grep', pattern: 'world', path: 'smoke' },
      { kind: 'listFiles', path: 'smoke' },
    ],
  });
  const failing = await stack.client.submit({
    id: `${ns}-smoke-fail`,
    image,
    steps: [{ command: 'sh', args: ['-c', 'echo oops >&2; exit 4'] }, { command: 'true' }],
  });
  const cancel = await stack.client.submit({
    id: `${ns}-smoke-cancel`,
    image,
    steps: [{ command: 'sleep', args: ['60'] }],
  });

  const r = await stack.client.wait(ok.jobId, { timeoutMs });
  expect(r.state, r.reason).toBe('succeeded');
  expect(r.stepResults['step-3']?.output).toMatchObject({ content: 'hello\nsmoke world\n' });
  expect(r.stepResults['step-4']?.output).toMatchObject({ matches: [{ path: 'hello.txt', line: 2 }] });
  expect(r.stepResults['step-5']?.output).toMatchObject({ entries: [{ path: 'hello.txt', type: 'file' }] });
  expect(await outputLines(stack.client, ok.jobId)).toEqual(['step-2:hello', 'step-2:smoke world']);

  const f = await stack.client.wait(failing.jobId, { timeoutMs });
  expect(f.state).toBe('failed');
  expect(f.stepResults['step-1']?.exitCode).toBe(4);
  expect(f.stepResults['step-2']).toBeUndefined();

  for await (const item of stack.client.follow(cancel.jobId)) if (item.type === 'step-started') break;
  const asked = Date.now();
  await stack.client.cancel(cancel.jobId);
  const c = await stack.client.wait(cancel.jobId, { timeoutMs: 30_000 });
  expect(c.state).toBe('cancelled');
  expect(Date.now() - asked).toBeLessThan(2_000);
}
