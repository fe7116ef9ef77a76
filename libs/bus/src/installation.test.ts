import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { describe, expect, it } from 'vitest';
import { InstallationIdentity, installationOf } from './installation.js';
import { createKeySpace } from './key-space.js';

// Its own redis-server: the test flushes it, as a Redis restarted without its data would be.
const own = usePrivateRedis();

describe('InstallationIdentity', () => {
  it('is generated once per Redis and namespace and read back by every service', async () => {
    const keys = createKeySpace('inst-a');
    const first = await new InstallationIdentity(own.redis, keys).refresh();
    const second = await new InstallationIdentity(own.redis, keys).refresh();
    expect(first).toMatch(/^r-[0-9a-f]{12}$/);
    expect(second).toBe(first);
    const other = await new InstallationIdentity(own.redis, createKeySpace('inst-b')).refresh();
    expect(other).not.toBe(first);
    // A configured name labels sandboxes; without one, the id does.
    expect(installationOf({ SANDSTREAM_INSTALLATION: 'compose' }, first)).toBe('compose');
    expect(installationOf({}, first)).toBe(first);
  });

  it('survives a Redis that lost its data while a service held it, and remembers one it lost to a newcomer', async () => {
    const keys = createKeySpace('inst-c');
    const running = new InstallationIdentity(own.redis, keys);
    const held = await running.refresh();
    await own.redis.flushall();
    // The running service writes its id back: nothing of this installation looks foreign.
    expect(await running.refresh()).toBe(held);
    expect(await own.redis.get(keys.installationId)).toBe(held);

    await own.redis.flushall();
    // A service started in the gap writes a new id first; the old one stays this Redis's.
    const newcomer = await new InstallationIdentity(own.redis, keys).refresh();
    expect(newcomer).not.toBe(held);
    expect(await running.refresh()).toBe(newcomer);
    expect([...(await running.known())].sort()).toEqual([held, newcomer].sort());
  });
});
