import { describe, expect, it } from 'vitest';
import { resolveSecretEnv } from './secret-env.js';

describe('resolveSecretEnv', () => {
  it('reads each secret from the named variable of the backend process', () => {
    expect(
      resolveSecretEnv({ TOKEN: { secretName: 'GIT_TOKEN', key: 'token' } }, { GIT_TOKEN: 'abc' }),
    ).toEqual({
      TOKEN: 'abc',
    });
  });

  it('names every missing secret and its variable', () => {
    expect(() =>
      resolveSecretEnv({ A: { secretName: 'NOPE_A', key: 'k' }, B: { secretName: 'NOPE_B', key: 'k' } }, {}),
    ).toThrow(
      /secretEnv\.A: environment variable NOPE_A is not set.*secretEnv\.B: environment variable NOPE_B/,
    );
  });
});
