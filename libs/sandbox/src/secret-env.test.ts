import { describe, expect, it } from 'vitest';
import { resolveSecretEnv, secretEnvVariable } from './secret-env.js';

describe('resolveSecretEnv', () => {
  it('reads each secret from its SANDSTREAM_SECRET_ variable of the backend process', () => {
    expect(secretEnvVariable('git-token')).toBe('SANDSTREAM_SECRET_GIT_TOKEN');
    expect(
      resolveSecretEnv(
        { TOKEN: { secretName: 'git-token', key: 'token' } },
        { SANDSTREAM_SECRET_GIT_TOKEN: 'abc' },
      ),
    ).toEqual({ TOKEN: 'abc' });
  });

  it('never reaches the service’s own variables: a secret named after one finds nothing', () => {
    const env = { REDIS_URL: 'redis://admin:pw@redis:6379', SANDSTREAM_SECRET_OTHER: 'x' };
    expect(() => resolveSecretEnv({ LEAK: { secretName: 'REDIS_URL', key: 'k' } }, env)).toThrow(
      'secretEnv.LEAK: secret "REDIS_URL" is not set (the backend process reads it from SANDSTREAM_SECRET_REDIS_URL)',
    );
  });

  it('names every missing secret and its variable', () => {
    expect(() =>
      resolveSecretEnv({ A: { secretName: 'nope-a', key: 'k' }, B: { secretName: 'nope-b', key: 'k' } }, {}),
    ).toThrow(/secretEnv\.A: secret "nope-a".*SANDSTREAM_SECRET_NOPE_A.*secretEnv\.B: secret "nope-b"/);
  });
});
