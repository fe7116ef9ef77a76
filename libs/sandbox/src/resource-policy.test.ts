import { describe, expect, it } from 'vitest';
import { applyResourcePolicy, ResourceLimitError, resourcePolicyFromEnv } from './resource-policy.js';
import { SandboxSpecSchema } from './sandbox-spec.js';

describe('resource policy: the disk limit (issue 28 §1)', () => {
  const policy = resourcePolicyFromEnv({ SANDBOX_DEFAULT_DISK: '2Gi', SANDBOX_MAX_DISK: '20Gi' });
  const spec = (resources: unknown) => SandboxSpecSchema.parse({ image: 'x', resources });

  it('gives a spec without one the operator default, keeps its own, and raises it to a larger request', () => {
    expect(applyResourcePolicy(spec({}), policy).resources.limits?.ephemeralStorage).toBe('2Gi');
    expect(resourcePolicyFromEnv({}).defaults.disk).toBe('10Gi');
    const own = applyResourcePolicy(spec({ limits: { ephemeralStorage: '512Mi' } }), policy);
    expect(own.resources.limits?.ephemeralStorage).toBe('512Mi');
    const asked = applyResourcePolicy(spec({ requests: { ephemeralStorage: '4Gi' } }), policy);
    expect(asked.resources.limits?.ephemeralStorage).toBe('4Gi');
  });

  it('refuses a limit above the maximum, naming the field and the variable, and a default above it', () => {
    expect(() => applyResourcePolicy(spec({ limits: { ephemeralStorage: '50Gi' } }), policy)).toThrow(
      new ResourceLimitError(
        'resources.limits.ephemeralStorage "50Gi" is above the operator maximum 20Gi (SANDBOX_MAX_DISK)',
      ),
    );
    expect(() => resourcePolicyFromEnv({ SANDBOX_DEFAULT_DISK: '30Gi', SANDBOX_MAX_DISK: '20Gi' })).toThrow(
      'SANDBOX_DEFAULT_DISK=30Gi is above SANDBOX_MAX_DISK=20Gi',
    );
    expect(() => resourcePolicyFromEnv({ SANDBOX_DEFAULT_DISK: 'lots' })).toThrow(/SANDBOX_DEFAULT_DISK/);
  });
});
