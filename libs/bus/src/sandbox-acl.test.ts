import { testRedisUrl } from '@sandstream/test-support';
import { usePrivateRedis } from '@sandstream/test-support/vitest';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createKeySpace } from './key-space.js';
import { SandboxAcl, urlWithCredentials } from './sandbox-acl.js';

const url = testRedisUrl();
const admin = new Redis(url);
const suffix = Math.random().toString(36).slice(2, 10);
const keys = createKeySpace(`t-acl-${suffix}`);
// Unique user prefix: this runs on the shared Redis beside other engineers' tests.
const acl = new SandboxAcl(admin, keys, `sandstream-test-${suffix}-`);
const jobA = `acl-a-${suffix}`;
const jobB = `acl-b-${suffix}`;
const notify = keys.completionStream(0);

afterAll(async () => {
  await acl.delete(jobA);
  await acl.delete(jobB);
  await admin.unlink(keys.sandbox(jobA).heartbeat, keys.sandbox(jobB).results, notify, `job:{${jobA}}`);
  admin.disconnect();
});

describe('per-sandbox Redis user', () => {
  it('reaches its own keys and XADDs its notify stream, and nothing else', async () => {
    expect(await acl.supported()).toBe(true);
    const creds = await acl.create(jobA, notify);
    await acl.create(jobB, notify);
    await admin.lpush(keys.sandbox(jobB).results, 'secret result of B');
    await admin.hset(`job:{${jobA}}`, 'state', 'running');
    const sandbox = new Redis(urlWithCredentials(url, creds), {
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      enableReadyCheck: false,
    });
    try {
      await sandbox.connect();
      // What the agent does:
      expect(await sandbox.set(keys.sandbox(jobA).heartbeat, '1', 'PX', 5000)).toBe('OK');
      expect(await sandbox.xadd(notify, 'MAXLEN', '~', 100, '*', 'jobId', jobA, 'stepId', 's1')).toBeTruthy();
      expect(await sandbox.brpop(keys.sandbox(jobA).in, 0.05)).toBeNull();
      // With the log archive on, the agent measures its own events stream.
      expect(await sandbox.xlen(keys.sandbox(jobA).events)).toBe(0);
      // It announces that it started on its own ready channel (pod-lifecycle waits for that).
      expect(await sandbox.publish(keys.sandbox(jobA).ready, '1')).toBeGreaterThanOrEqual(0);
      // What it must not:
      await expect(sandbox.lrange(keys.sandbox(jobB).results, 0, -1)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.rpop(keys.sandbox(jobB).results)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.xrange(notify, '-', '+')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.publish(keys.sandbox(jobB).ready, '1')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.publish('events:lifecycle', '1')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.xlen(keys.sandbox(jobB).events)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.hset(`job:{${jobA}}`, 'state', 'succeeded')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.keys('*')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.call('CONFIG', 'GET', 'requirepass')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.call('ACL', 'LIST')).rejects.toThrow(/NOPERM/);
      // No other database, where its pattern would hold outside what the budget and the
      // cleanup watch (issue 28 §3); nor any command the agent does not send.
      await expect(sandbox.select(1)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.call('SWAPDB', '0', '1')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.call('MOVE', keys.sandbox(jobA).heartbeat, '1')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.get(keys.sandbox(jobA).heartbeat)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.ping()).rejects.toThrow(/NOPERM/);
      await expect(sandbox.call('FLUSHDB')).rejects.toThrow(/NOPERM/);
      expect(await admin.llen(keys.sandbox(jobB).results)).toBe(1);
      expect(await admin.hget(`job:{${jobA}}`, 'state')).toBe('running');
    } finally {
      sandbox.disconnect();
    }
    expect(await acl.listJobIds()).toEqual(expect.arrayContaining([jobA, jobB]));
  });

  it('is gone after delete: its password no longer authenticates', async () => {
    const creds = await acl.create(jobA, notify);
    await acl.delete(jobA);
    await acl.delete(jobA); // idempotent
    const probe = new Redis(url);
    try {
      await expect(probe.call('AUTH', creds.username, creds.password)).rejects.toThrow(/WRONGPASS/);
    } finally {
      probe.disconnect();
    }
  });
});

describe('a warm pool member Redis user', () => {
  const member = `acl-m-${suffix}`;
  const claimer = `acl-c-${suffix}`;
  afterAll(async () => {
    await acl.delete(member);
    await acl.delete(claimer);
    await admin.unlink(keys.sandbox(member).heartbeat, keys.sandbox(member).claim, keys.sandbox(claimer).in);
  });

  it('waits on its own claim key and nothing else; the claim gives the same password the job user', async () => {
    const creds = await acl.createPoolMember(member);
    await admin.lpush(keys.sandbox(jobB).results, 'secret result of B');
    const sandbox = new Redis(urlWithCredentials(url, creds), {
      maxRetriesPerRequest: 1,
      enableReadyCheck: false,
    });
    try {
      // What a member's agent does: heartbeat, announce, pop its claim.
      expect(await sandbox.set(keys.sandbox(member).heartbeat, '1', 'PX', 5000)).toBe('OK');
      expect(await sandbox.publish(keys.sandbox(member).ready, '1')).toBeGreaterThanOrEqual(0);
      await admin.lpush(keys.sandbox(member).claim, '{"jobId":"x"}');
      expect(await sandbox.brpop(keys.sandbox(member).claim, 1)).toEqual([
        keys.sandbox(member).claim,
        '{"jobId":"x"}',
      ]);
      // Nothing of any job, not even its own member's other keys.
      await expect(sandbox.lpush(keys.sandbox(member).in, 'x')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.lrange(keys.sandbox(jobB).results, 0, -1)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.brpop(keys.sandbox(claimer).in, 0.05)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.publish(keys.sandbox(claimer).ready, '1')).rejects.toThrow(/NOPERM/);
      await expect(sandbox.get(keys.sandbox(member).heartbeat)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.select(1)).rejects.toThrow(/NOPERM/);
      await expect(sandbox.ping()).rejects.toThrow(/NOPERM/);
    } finally {
      sandbox.disconnect();
    }
    // Claimed: the job's user takes the member's password (its hash), with the job's rules.
    const username = await acl.createForClaim(claimer, notify, creds.passwordHash);
    const bound = new Redis(urlWithCredentials(url, { ...creds, username }), {
      maxRetriesPerRequest: 1,
      enableReadyCheck: false,
    });
    try {
      expect(await bound.lpush(keys.sandbox(claimer).in, 'step')).toBe(1);
      await expect(bound.brpop(keys.sandbox(member).claim, 0.05)).rejects.toThrow(/NOPERM/);
    } finally {
      bound.disconnect();
    }
  });
});

// A private redis-server: this one writes into database 2 and tries database 1.
describe('sandbox users of an installation in another database than 0', () => {
  const own = usePrivateRedis();

  it('may SELECT the installation database, as its agent does on connecting, and no other', async () => {
    const services = new Redis(`${own.server.url}/2`);
    const jobAcl = new SandboxAcl(services, keys);
    const job = `acl-db-${suffix}`;
    const member = `acl-db-m-${suffix}`;
    try {
      const creds = await jobAcl.create(job, notify);
      const memberCreds = await jobAcl.createPoolMember(member);
      // The agent's URL names the database: ioredis SELECTs it when it connects.
      const sandbox = new Redis(urlWithCredentials(`${own.server.url}/2`, creds), {
        maxRetriesPerRequest: 0,
        enableReadyCheck: false,
      });
      const idle = new Redis(urlWithCredentials(`${own.server.url}/2`, memberCreds), {
        maxRetriesPerRequest: 0,
        enableReadyCheck: false,
      });
      try {
        expect(await sandbox.lpush(keys.sandbox(job).results, 'r')).toBe(1);
        expect(await services.llen(keys.sandbox(job).results)).toBe(1);
        expect(await own.redis.exists(keys.sandbox(job).results)).toBe(0); // not in database 0
        expect(await idle.set(keys.sandbox(member).heartbeat, '1', 'PX', 5000)).toBe('OK');
        for (const client of [sandbox, idle]) {
          expect(await client.select(2)).toBe('OK');
          await expect(client.select(1)).rejects.toThrow(/NOPERM/);
          await expect(client.select(0)).rejects.toThrow(/NOPERM/);
        }
      } finally {
        sandbox.disconnect();
        idle.disconnect();
      }
    } finally {
      await jobAcl.delete(job);
      await jobAcl.delete(member);
      services.disconnect();
    }
  });
});
