import { PoolClaimSchema } from '@sandstream/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { agentEnvironment, environmentChanged } from './agent-environment.js';
import { bindClaim } from './await-claim.js';
import { parseConfig, type RunConfig } from './config.js';

const NAME = 'SANDSTREAM_AGENT_ENVIRONMENT_TEST';

afterEach(() => {
  delete process.env[NAME];
  environmentChanged();
});

describe('the agent environment steps inherit', () => {
  it('is read once: a later change to process.env reaches steps only after environmentChanged()', () => {
    process.env[NAME] = 'before';
    environmentChanged();
    expect(agentEnvironment()[NAME]).toBe('before');
    process.env[NAME] = 'after';
    expect(agentEnvironment()[NAME]).toBe('before');
    environmentChanged();
    expect(agentEnvironment()[NAME]).toBe('after');
  });

  it("takes a warm-pool claim's variables, and drops what it unsets, once bound", () => {
    process.env[NAME] = 'member';
    environmentChanged();
    expect(agentEnvironment()[NAME]).toBe('member');
    const command = parseConfig(['--redis-url', 'redis://127.0.0.1:6379', '--job-id', 'member'], {}, '/tmp');
    if (command.mode !== 'run') throw new Error('expected a run configuration');
    const config: RunConfig = command;
    bindClaim(
      config,
      PoolClaimSchema.parse({ jobId: 'job', env: { [`${NAME}_CLAIM`]: 'claim' }, unsetEnv: [NAME] }),
    );
    try {
      expect(agentEnvironment()[NAME]).toBeUndefined();
      expect(agentEnvironment()[`${NAME}_CLAIM`]).toBe('claim');
    } finally {
      delete process.env[`${NAME}_CLAIM`];
    }
  });
});
