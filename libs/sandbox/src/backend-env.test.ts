import { describe, expect, it } from 'vitest';
import { dockerOptionsFromEnv } from './backend-env.js';

describe('dockerOptionsFromEnv: SANDSTREAM_DOCKER_CGROUP_PARENT', () => {
  it('passes a cgroup path on to the backend, and nothing when blank', () => {
    expect(
      dockerOptionsFromEnv({ SANDSTREAM_DOCKER_CGROUP_PARENT: '/sandstream/sandboxes' }).cgroupParent,
    ).toBe('/sandstream/sandboxes');
    expect(dockerOptionsFromEnv({ SANDSTREAM_DOCKER_CGROUP_PARENT: ' ' }).cgroupParent).toBeUndefined();
  });

  it('refuses what is no cgroup path, naming the variable', () => {
    expect(() => dockerOptionsFromEnv({ SANDSTREAM_DOCKER_CGROUP_PARENT: 'a b' })).toThrow(
      /SANDSTREAM_DOCKER_CGROUP_PARENT must be a cgroup path/,
    );
    expect(() => dockerOptionsFromEnv({ SANDSTREAM_DOCKER_CGROUP_PARENT: 'a/../b' })).toThrow(
      /SANDSTREAM_DOCKER_CGROUP_PARENT must not contain \.\./,
    );
    expect(() => dockerOptionsFromEnv({ SANDSTREAM_DOCKER_CGROUP_PARENT: 'x'.repeat(201) })).toThrow(
      /at most 200 characters/,
    );
  });
});
