import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SANDBOX_USER_PREFIX } from '@sandstream/bus';
import { closeDefaultRedisUser, type RedisServer, startRedisServer } from '@sandstream/test-support';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Stack, startStack } from '../helpers/services-stack.js';

// Issue 28 §3 and §5 on the in-process backend: the four services on a private redis-server (the
// tests write into database 1 and measure Redis as a whole, which the shared one must not see),
// with the `default` user off and a per-sandbox Redis user for every agent, as shipped.
const MB = 1024 * 1024;
const BUDGET_MB = 10;

describe('a sandbox in Redis: one database, its own keys, nothing left after close (issue 28 §3, §5)', () => {
  let server: RedisServer;
  let admin: Redis;
  /** The same Redis, database 1: where an older ACL let a sandbox SELECT to. */
  let db1: Redis;
  let adminUrl = '';
  let stack: Stack;

  beforeAll(async () => {
    server = await startRedisServer();
    adminUrl = await closeDefaultRedisUser(server);
    admin = new Redis(adminUrl);
    db1 = new Redis(`${adminUrl}/1`);
    stack = await startStack({
      label: 'rdb',
      env: {
        REDIS_URL: adminUrl,
        SANDBOX_ACL: 'on',
        SANDBOX_REDIS_BUDGET_MB: String(BUDGET_MB),
        REDIS_BUDGET_CHECK_MS: '100',
        REDIS_BUDGET_MEASURE_MS: '1000',
      },
      redis: () => new Redis(adminUrl),
    });
  }, 60_000);

  afterAll(async () => {
    await stack?.stop();
    admin?.disconnect();
    db1?.disconnect();
    await server?.stop();
  });

  const usedMemory = async () => Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))?.[1]);
  /** Keys per database, from INFO keyspace. */
  const keyCounts = async () =>
    Object.fromEntries(
      [...(await admin.info('keyspace')).matchAll(/^db(\d+):keys=(\d+)/gm)].map((m) => [m[1], Number(m[2])]),
    );
  /** A connection as the sandbox's own Redis user: a second password added to it, its rules untouched. */
  const asSandbox = async (id: string) => {
    await admin.call('ACL', 'SETUSER', `${SANDBOX_USER_PREFIX}${id}`, '>test-only-password');
    const own = new Redis(server.url, {
      username: `${SANDBOX_USER_PREFIX}${id}`,
      password: 'test-only-password',
      maxRetriesPerRequest: 0,
      enableReadyCheck: false,
    });
    own.on('error', () => {});
    return own;
  };
  /** What Redis refused the sandbox's user (ACL LOG), by command. */
  const refused = async (id: string) =>
    ((await admin.call('ACL', 'LOG')) as unknown[][])
      .map((entry) => {
        const fields = new Map<string, unknown>();
        for (let i = 0; i < entry.length; i += 2) fields.set(String(entry[i]), entry[i + 1]);
        return fields;
      })
      .filter((f) => f.get('username') === `${SANDBOX_USER_PREFIX}${id}`)
      .map((f) => String(f.get('object')));

  it("runs the agent's whole job under a user that may not SELECT another database, nor send anything it does not need", async () => {
    const id = `${stack.namespace}-ok`;
    await using sandbox = await stack.client.sandboxes.create({ id, image: 'debian:bookworm-slim' });
    // A run step, file steps, a transfer each way (its own raw connection), a terminal (MULTI/EXEC).
    expect((await sandbox.exec(['sh', '-c', 'echo hi; echo err >&2'])).stdout).toBe('hi\n');
    expect(await sandbox.files.write('a.txt', 'alpha\n')).toBe(6);
    expect(await sandbox.files.read('a.txt')).toBe('alpha\n');
    const local = mkdtempSync(join(tmpdir(), 'sandstream-rdb-'));
    try {
      mkdirSync(join(local, 'tree'));
      writeFileSync(join(local, 'tree', 'b.txt'), 'beta\n');
      await sandbox.files.upload(join(local, 'tree'), 'in');
      await sandbox.files.downloadTo('in/tree', join(local, 'back'));
      expect(readFileSync(join(local, 'back', 'tree', 'b.txt'), 'utf8')).toBe('beta\n');
    } finally {
      rmSync(local, { recursive: true, force: true });
    }
    const terminal = await sandbox.terminals.open({ command: ['/bin/sh'] });
    let screen = '';
    const reading = (async () => {
      for await (const chunk of terminal.output()) screen += chunk.toString('utf8');
    })();
    await terminal.write('echo "term-$((6*7))"; exit 0\n');
    await vi.waitUntil(() => screen.includes('term-42'), { timeout: 20_000, interval: 50 });
    await reading.catch(() => {});

    // Nothing the agent sent was refused (CLIENT SETINFO, which ioredis sends and ignores the
    // answer to, exists only from Redis 7.2 on, where it would be the one refusal).
    expect((await refused(id)).filter((c) => c !== 'client|setinfo')).toEqual([]);

    // What a compromised sandbox holding its credentials may not do.
    const own = await asSandbox(id);
    try {
      await expect(own.select(1)).rejects.toThrow(/NOPERM/);
      await expect(own.call('SWAPDB', '0', '1')).rejects.toThrow(/NOPERM/);
      await expect(own.call('MOVE', `sandbox:{${id}}:x`, '1')).rejects.toThrow(/NOPERM/);
      await expect(own.ping()).rejects.toThrow(/NOPERM/);
      // Its own keys, in its own database, still.
      expect(await own.lpush(`sandbox:{${id}}:mine`, 'x')).toBe(1);
    } finally {
      own.disconnect();
    }
  }, 60_000);

  it('counts what a sandbox stored in another database against its budget: over it, it is stopped with its budget reason and that is freed', async () => {
    const id = `${stack.namespace}-hop`;
    await using sandbox = await stack.client.sandboxes.create({ id, image: 'debian:bookworm-slim' });
    expect((await sandbox.exec('echo up')).stdout).toBe('up\n');
    // As a sandbox did while its ACL allowed SELECT (an older deployment's): its own pattern, in
    // database 1, past its budget. Nothing in its own database.
    const key = `sandbox:{${id}}:elsewhere`;
    for (let i = 0; i < BUDGET_MB + 4; i++) await db1.lpush(key, Buffer.alloc(MB, i));
    await db1.set('not-a-sandbox-key-hop', 'stays');

    await expect.poll(async () => (await sandbox.info()).state, { timeout: 30_000 }).toBe('failed');
    const info = await sandbox.info();
    expect(info.reason).toBe('redis-budget');
    expect(info.message).toMatch(/over its Redis budget: the sandbox stored [\d.]+ MB in Redis/);
    await expect.poll(() => db1.exists(key), { timeout: 20_000 }).toBe(0);
    expect(await db1.get('not-a-sandbox-key-hop')).toBe('stays');
    await db1.unlink('not-a-sandbox-key-hop');
  }, 60_000);

  it('frees everything a closed sandbox stored, in every database: Redis back to its baseline', async () => {
    const id = `${stack.namespace}-close`;
    const sandbox = await stack.client.sandboxes.create({ id, image: 'debian:bookworm-slim' });
    expect((await sandbox.exec('echo up')).stdout).toBe('up\n');
    await db1.set('not-a-sandbox-key-close', 'stays');
    const baseline = { memory: await usedMemory(), db1: (await keyCounts())['1'] };

    // Under its budget, so nothing stops it: what it stored goes only when it closes. In its own
    // database, under any name of its own (as its user may), and in database 1 (an older ACL).
    const own = await asSandbox(id);
    for (let i = 0; i < 3; i++) await own.lpush(`sandbox:{${id}}:flood`, Buffer.alloc(MB, i));
    own.disconnect();
    for (let i = 0; i < 3; i++) await db1.lpush(`sandbox:{${id}}:flood-${i}`, Buffer.alloc(MB, i));
    expect(await usedMemory()).toBeGreaterThan(baseline.memory + 5 * MB);

    await sandbox.close();
    await expect
      .poll(
        async () => [...(await admin.keys(`sandbox:{${id}}:*`)), ...(await db1.keys(`sandbox:{${id}}:*`))],
        {
          timeout: 30_000,
        },
      )
      // Its events stream is the job's output, kept for the reaper's retention.
      .toEqual([`sandbox:{${id}}:events`]);
    expect((await keyCounts())['1']).toBe(baseline.db1);
    expect(await db1.get('not-a-sandbox-key-close')).toBe('stays');
    await expect.poll(usedMemory, { timeout: 20_000 }).toBeLessThan(baseline.memory + MB);
    const mb = (n: number) => (n / MB).toFixed(1);
    console.log(
      `[measure] close: Redis ${mb(baseline.memory)} MB before the 6 MB, ${mb(await usedMemory())} MB after close`,
    );
    await db1.unlink('not-a-sandbox-key-close');
  }, 60_000);
});
