import { freePort, type RunningService, startService, uniqueNamespace } from '@sandstream/test-support';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Issue 27 §6: the API refuses a NUL byte in a job's or a live command's program, arguments,
// working directory or environment with 400, naming the field, before anything is queued or
// pushed (the sandbox need not exist: nothing reaches it). Only the API runs.
describe('API: NUL bytes are refused at the edge', () => {
  let api: RunningService;
  let url = '';
  const namespace = uniqueNamespace('api-nul');
  beforeAll(async () => {
    const port = await freePort();
    api = await startService('api', {
      SANDSTREAM_NAMESPACE: namespace,
      API_PORT: String(port),
      API_ANONYMOUS: 'loopback',
    });
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await api?.stop(15_000);
  });

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { detail: string } };
  };

  it.each([
    ['a program', { command: ['ec\0ho'] }, 'command: command must not contain a NUL byte'],
    ['an argument (argv)', { command: ['echo', 'a\0b'] }, 'args.0: an argument must not contain a NUL byte'],
    ['an argument (args)', { command: 'echo', args: ['a', 'b\0'] }, 'args.1: an argument must not contain'],
    ['cwd', { command: ['pwd'], cwd: '/t\0' }, 'body.cwd: cwd must not contain a NUL byte'],
    ['an environment value', { command: ['env'], env: { A: 'v\0' } }, 'env.A: an environment value must not'],
  ])('exec: refuses one in %s with 400', async (_what, body, detail) => {
    const res = await post(`/v1/sandboxes/${namespace}-none/exec`, body);
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain(detail);
  });

  it('jobs: refuses one in a step argument with 400, naming the step field', async () => {
    const res = await post('/v1/jobs', { image: 'x', steps: [{ command: 'echo', args: ['a\0'] }] });
    expect(res.status).toBe(400);
    expect(res.body.detail).toContain('steps.0.args.0: an argument must not contain a NUL byte (\\0)');
  });
});
