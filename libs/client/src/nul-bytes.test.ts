import { randomBytes } from 'node:crypto';
import { testRedisUrl } from '@sandstream/test-support';
import { afterAll, describe, expect, it } from 'vitest';
import { SandstreamClient } from './client.js';
import { SandstreamOptionsError } from './client-options.js';

// Issue 27 §6: a NUL byte in a live sandbox's command (its program, an argument, cwd, an
// environment name or value, a file path) is refused by the SDK before anything is pushed, with
// the field named, as the SDK's bad-input error (the API answers it 400). The sandbox need not
// exist: nothing reaches Redis.
const client = new SandstreamClient({
  redisUrl: testRedisUrl(),
  namespace: `t-nul-${randomBytes(4).toString('hex')}`,
});
afterAll(() => client.close());

describe('live sandbox commands with a NUL byte', () => {
  const sandbox = client.sandboxes.handle('nul-sandbox');
  it.each([
    ['the program', () => sandbox.exec(['ec\0ho']), 'command: command must not contain a NUL byte'],
    ['an argument', () => sandbox.exec(['echo', 'a\0']), 'args.0: an argument must not contain a NUL byte'],
    ['cwd', () => sandbox.exec(['pwd'], { cwd: '/t\0' }), 'cwd: cwd must not contain a NUL byte'],
    [
      'an environment name',
      () => sandbox.exec(['env'], { env: { 'A\0B': 'v' } }),
      'env."A\\u0000B": an environment name must not contain a NUL byte',
    ],
    [
      'an environment value',
      () => sandbox.exec(['env'], { env: { A: 'v\0' } }),
      'env.A: an environment value must not contain a NUL byte',
    ],
    ['a readFile path', () => sandbox.files.read('a\0b'), 'path: path must not contain a NUL byte'],
    ['a writeFile path', () => sandbox.files.write('a\0b', 'x'), 'path: path must not contain a NUL byte'],
  ])('refuses one in %s, naming the field', async (_what, call, message) => {
    // Whatever the call hands back (an execution, a promise), the refusal is a rejection.
    const err = await Promise.resolve()
      .then(async (): Promise<unknown> => call())
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandstreamOptionsError);
    expect((err as Error).message).toContain(message);
  });
});
