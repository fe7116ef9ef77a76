import {
  createKeySpace,
  type JobState,
  JobStore,
  type KeySpace,
  type PoolMember,
  parseJobSpec,
  SandboxAcl,
  saveSandboxUser,
  urlWithCredentials,
  WarmPoolStore,
} from '@sandstream/bus';
import { silentLogger } from '@sandstream/telemetry';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { SandboxUserRestorer } from './sandbox-user-restorer.js';

// ACL users are not in the AOF: after a restart the records are back and the users are not.
// A private redis-server, whose users the test deletes as the restart would.
describe('SandboxUserRestorer', () => {
  const own = usePrivateRedis({ maxRetriesPerRequest: null });

  /** Job `id` walked through `states`, with its sandbox user made and kept as pod-lifecycle does. */
  const jobWithSandboxUser = async (keys: KeySpace, id: string, states: JobState[]) => {
    const store = new JobStore({ redis: own.redis, keys });
    await store.create(parseJobSpec({ id, image: 'none', steps: [{ command: 'true' }] }));
    let from: JobState = 'queued';
    for (const to of states) {
      await store.transition(id, [from], to);
      from = to;
    }
    const credentials = await new SandboxAcl(own.redis, keys).create(id, keys.completionStream(0));
    await saveSandboxUser(own.redis, keys, id, {
      username: credentials.username,
      notifyStream: keys.completionStream(0),
      passwordHash: credentials.passwordHash,
    });
    return credentials;
  };

  /** A restorer whose periodic pass is an hour off, so only what a test does can trigger it. */
  const restorerOf = (keys: KeySpace, acl: SandboxAcl) =>
    new SandboxUserRestorer({
      redis: own.redis,
      keys,
      acl,
      logger: silentLogger('restorer-test'),
      intervalMs: 3_600_000,
    });

  it('re-creates the users of live jobs from their kept hash when its connection comes back', async () => {
    const keys = createKeySpace('restore');
    const acl = new SandboxAcl(own.redis, keys);
    const live = await jobWithSandboxUser(keys, 'live', ['scheduled', 'starting', 'running']);
    await jobWithSandboxUser(keys, 'done', ['scheduled', 'starting', 'running', 'succeeded']);
    for (const id of ['live', 'done']) await acl.delete(id);

    // Its periodic pass is an hour off: only the reconnect can trigger it within this test.
    const restorer = restorerOf(keys, acl);
    restorer.start();
    try {
      // The connection drops and comes back, as when Redis restarts.
      own.redis.disconnect(true);
      const agent = new Redis(urlWithCredentials(own.server.url, live), {
        lazyConnect: true,
        maxRetriesPerRequest: 0,
        retryStrategy: () => null,
      });
      agent.on('error', () => {});
      // The live job's user is back once it can log in again (and beat, as its agent does: a
      // sandbox user may not PING).
      await vi.waitUntil(
        async () => {
          const ok = await agent.connect().then(
            () => agent.set(keys.sandbox('live').heartbeat, '1', 'PX', 1000),
            () => null,
          );
          if (ok !== 'OK') agent.disconnect();
          return ok === 'OK';
        },
        { timeout: 15_000, interval: 100 },
      );
      agent.disconnect();
      expect(await acl.exists('live')).toBe(true);
      // A finished job's user stays gone.
      expect(await acl.exists('done')).toBe(false);
    } finally {
      await restorer.stop();
    }
  });

  it('re-creates them at its own start: Redis may have restarted while pod-lifecycle was down', async () => {
    const keys = createKeySpace('restore-at-start');
    const acl = new SandboxAcl(own.redis, keys);
    await jobWithSandboxUser(keys, 'was-running', ['scheduled', 'starting', 'running']);
    await acl.delete('was-running');
    // No reconnect and no periodic pass within this test: only the start can restore it.
    const restorer = restorerOf(keys, acl);
    restorer.start();
    try {
      await vi.waitUntil(() => acl.exists('was-running'), { timeout: 15_000, interval: 100 });
    } finally {
      await restorer.stop();
    }
  });
  it("re-creates idle warm pool members' users from the hash in their record, not claimed ones", async () => {
    const keys = createKeySpace('restore-members');
    const pools = new WarmPoolStore(own.redis, keys);
    const acl = new SandboxAcl(own.redis, keys);
    const member = async (id: string, claimed: boolean) => {
      const credentials = await acl.createPoolMember(id);
      const record: PoolMember = {
        id,
        pool: 'node',
        specHash: 'v1',
        tenants: null,
        state: 'starting',
        createdAt: Date.now(),
        readyBy: Date.now() + 60_000,
        owner: 'test',
        passwordHash: credentials.passwordHash,
      };
      expect(await pools.reserve(record, { max: 5, capacity: 5 })).toBe('reserved');
      expect(await pools.markReady(record)).toBe(true);
      if (claimed) expect(await pools.update({ ...record, state: 'claimed' }, 'ready')).toBe(true);
      return credentials;
    };
    const idle = await member('idle-member', false);
    await member('claimed-member', true);
    // The restart: records back (AOF), users gone.
    for (const id of ['idle-member', 'claimed-member']) await acl.delete(id);

    const restorer = new SandboxUserRestorer({
      redis: own.redis,
      keys,
      acl,
      poolMembers: pools,
      logger: silentLogger('restorer-test'),
      intervalMs: 3_600_000,
    });
    restorer.start();
    try {
      await vi.waitUntil(() => acl.exists('idle-member'), { timeout: 15_000, interval: 100 });
      // With the password its agent holds, as itself: its heartbeat yes, anything else no.
      const agent = new Redis(urlWithCredentials(own.server.url, idle), { maxRetriesPerRequest: 0 });
      try {
        expect(await agent.set(keys.sandbox('idle-member').heartbeat, '1', 'PX', 1000)).toBe('OK');
        await expect(agent.set(keys.sandbox('claimed-member').heartbeat, '1')).rejects.toThrow(/NOPERM/);
      } finally {
        agent.disconnect();
      }
      expect(await acl.exists('claimed-member')).toBe(false);
    } finally {
      await restorer.stop();
    }
  });
});
